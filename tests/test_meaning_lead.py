"""When meaning leads (the words hold little of the question), which of its nearest come
first: for an embedder that reads sentences (`Search.lead_all`), its whole lead; for
averaged word vectors, only those nearer than every one of the words' best."""

from __future__ import annotations

import numpy as np

from partner_memory.recall.analyze import RecallAnalysis, terms
from partner_memory.recall.embed import StaticEmbedder, pack
from partner_memory.recall.encoder import EncoderEmbedder
from partner_memory.recall.searcher import Doc, Search
from partner_memory.recall.tantivy_index import TantivyIndex

DIMS = 16


def _towards(cosine: float, axis: int = 0, other: int = 1) -> bytes:
    """A vector at `cosine` to the question (which lies along `axis`)."""
    vector = np.zeros(DIMS, dtype=np.float32)
    vector[axis] = cosine
    vector[other] = float(np.sqrt(max(0.0, 1 - cosine * cosine)))
    return pack(vector.reshape(1, -1))[0]


def _index() -> tuple[TantivyIndex, np.ndarray]:
    """Messages sharing the question's one common word (the first also near in meaning),
    two that share no word but mean it, and ordinary talk."""
    texts = {
        0: ("we spend weekends in a small garden by the lake", 0.80),  # words' and near
        1: ("I bought a secondhand electric car", 0.95),  # meaning's first
        2: ("there is a scooter in our garage now", 0.70),  # meaning's third
        3: ("any plans for the weekends", 0.69),
        4: ("weekends are for soup", 0.68),
        5: ("lazy weekends", 0.69),
    }
    docs = [
        Doc("u", i, terms(text), vector=_towards(cosine, other=1 + i))
        for i, (text, cosine) in texts.items()
    ]
    docs += [
        Doc(
            "u",
            10 + i,
            terms(f"ordinary talk about the weather number {i}"),
            vector=_towards(0.0, other=7),
        )
        for i in range(40)
    ]
    index = TantivyIndex(None)
    index.add(docs)
    question = np.zeros(DIMS, dtype=np.float32)
    question[0] = 1.0
    return index, question


def _found(lead_all: bool) -> list[int]:
    index, question = _index()
    words = terms("what vehicle do we drive at weekends")
    assert words == ["vehicl", "drive", "weekend"]  # only the last is held, and it is common
    asked = Search(words, k=3, vector=question, fusion=1.0, lead_all=lead_all)
    return [h.place[1] for h in index.search(asked)]


def test_a_sentence_reading_embedder_puts_its_whole_lead_first() -> None:
    assert _found(lead_all=True) == [1, 0, 2]


def test_averaged_word_vectors_lead_only_with_what_is_nearer_than_the_words_best() -> None:
    found = _found(lead_all=False)
    assert found[0] == 1
    assert 2 not in found  # 0.70: one the words found (0.80) is nearer


def test_only_the_static_model_is_read_as_averaged_word_vectors() -> None:
    assert not RecallAnalysis(StaticEmbedder(64), worker=False).reads_sentences
    assert not RecallAnalysis(None, worker=False).reads_sentences
    assert RecallAnalysis(EncoderEmbedder.__new__(EncoderEmbedder), worker=False).reads_sentences
