"""Meaning leads when the words hold little of the question and meaning found something
nearer than they did (`TantivyIndex._with_meaning`, `Search.fusion`): a paraphrase shares
no word with its question, and the words then find only what shares a word by chance.
The nearest that only asks comes after the statements: a question is nearest another
question, and an answer is wanted. Built on hand-made vectors, one index, no model."""

from __future__ import annotations

import numpy as np
import pytest

from partner_memory import PartnerMemory, open_store
from partner_memory.recall.embed import pack
from partner_memory.recall.searcher import Doc, Search
from partner_memory.recall.tantivy_index import TantivyIndex
from tests.helpers import needs_encoder

QUESTION = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)


def _vector(*values: float) -> bytes:
    return pack(np.array([values], dtype=np.float32))[0]


def _index(answer: tuple[float, ...] = (0.9, 0.4, 0.0, 0.0)) -> TantivyIndex:
    """Chance matches for "go" in five units; the answer (no word of the question) and
    a question nearer than it in two more; the question's unit goes on after it, so its
    document is read back and written again with a neighbour."""
    index = TantivyIndex()
    filler = [
        Doc(f"f{i}", 0, ["go", "shop", f"item{i}"], vector=_vector(0, 1, i / 10, 0))
        for i in range(5)
    ]
    index.add(
        [
            *filler,
            Doc("answer", 0, ["kyoto", "april"], vector=_vector(*answer)),
            Doc("asked", 0, ["weather", "like"], vector=_vector(1, 0.1, 0, 0), asks=True),
        ]
    )
    index.add([Doc("asked", 1, ["sunni", "warm"], vector=_vector(0, 0, 1, 0))])
    return index


def _first(index: TantivyIndex, terms: list[str], fusion: float) -> str | None:
    hits = index.search(Search(terms, k=5, vector=QUESTION, fusion=fusion))
    return hits[0].place[0]


def test_meaning_leads_when_the_words_hold_little_and_statements_come_first() -> None:
    index = _index()
    # "go" is held by chance; "travel" by nothing: the words hold little of the question
    assert _first(index, ["go", "travel"], fusion=1.0) == "answer"
    assert _first(index, ["go", "travel"], fusion=0.0) != "answer"
    assert _first(index, [], fusion=1.0) == "answer"  # no word at all: meaning alone


def test_the_words_lead_when_they_hold_the_question() -> None:
    index = _index()
    assert str(_first(index, ["go", "shop"], fusion=1.0)).startswith("f")  # a chance match


def test_the_nearest_leads_though_a_neighbours_word_found_it() -> None:
    """The answer's document holds its neighbour's "go": the words found it (among
    their best); read alone it is still the nearest, and nearer than the others."""
    index = _index()
    index.add(
        [
            Doc("trip", 0, ["go", "plan"], vector=_vector(0, 0, 0, 1)),
            Doc("trip", 1, ["cherri", "blossom"], vector=_vector(0.95, 0.2, 0, 0)),
        ]
    )
    # said often and near in meaning too: by words and meaning's rescoring alone, first
    index.add([Doc(f"busy{i}", 0, ["go"] * 4, vector=_vector(0.9, 0.44, 0, 0)) for i in range(3)])
    for fusion, first in ((1.0, True), (0.0, False)):
        hits = index.search(Search(["go", "travel"], k=5, vector=QUESTION, fusion=fusion))
        assert (hits[0].place == ("trip", 1)) is first, hits


def test_meaning_does_not_lead_when_it_found_nothing_nearer_than_the_words() -> None:
    index = _index(answer=(0.0, 1.0, 0.0, 0.0))  # no nearer than the chance matches
    assert _first(index, ["go", "travel"], fusion=1.0) != "answer"


@needs_encoder
@pytest.mark.parametrize("rolled", [False, True], ids=["window", "stored"])
def test_the_readme_trip_is_found_among_short_turns_and_questions(rolled: bool) -> None:
    """The README's example with the encoder: "Where am I travelling?" finds the Kyoto
    turn first among ten short turns, four of them questions nearer the question than
    the answer is."""
    from partner_memory.recall.embed import EmbeddingSettings

    turns = [
        ("Good morning!", "Morning! How can I help?"),
        ("What's the weather like?", "Sunny, about 20 degrees."),
        ("I'm off to Kyoto in April.", "Book early, it's cherry-blossom season."),
        ("Can you recommend a book?", "Try 'Norwegian Wood'."),
        ("My sister just had a baby boy.", "Congratulations to her!"),
        ("How do I make pancakes?", "Flour, eggs, milk, a pinch of salt."),
        ("I switched jobs and now work at a bakery.", "That sounds lovely."),
        ("Remind me to call mum on Sunday.", "Noted: call mum on Sunday."),
        ("What time is it in Tokyo?", "It's 9 pm there."),
        ("Thanks, that's all for now.", "Anytime!"),
    ]
    settings = EmbeddingSettings.encoder(analysis_worker=False)
    with PartnerMemory(open_store("memory://"), "trip", idle_timer=False, embeddings=settings) as m:
        for said, replied in turns:
            m.record_turn(said, replied)
        if rolled:
            m.roll_now()
            m.wait()
        hits = m.recall("Where am I travelling?", k=5, activate=False).hits
        assert "Kyoto" in hits[0].message.content, [h.message.content for h in hits]
        assert (hits[0].unit_id is not None) is rolled


def test_a_message_that_only_asks_is_told_by_its_last_mark() -> None:
    from partner_memory.store.contract.capabilities import asks

    for text in ("Where am I travelling?", "去哪里？ ", "[USER]:\n\nIs it?"):
        assert asks(text), text
    for text in ("What? No, next year.", "", "I asked why.", "[USER]:\n\nI'm off to Kyoto."):
        assert not asks(text), text
