"""Recall by meaning: vectors beside words, from the shipped static model or an endpoint,
never compared across embedders, and recall by words when the endpoint fails."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from partner_memory import ConfigurationError, Message, PartnerMemory
from partner_memory.recall import chunk_vectors
from partner_memory.recall.embed import EmbeddingSettings, StaticEmbedder, pack
from partner_memory.recall.engine import RecallEngine
from partner_memory.recall.indexer import RECALL_CONSUMER
from partner_memory.recall.searcher import Doc, Search
from partner_memory.recall.tantivy_index import Scoring, TantivyIndex
from partner_memory.store import MemoryStore

OFF = EmbeddingSettings("off")


def _vector(*values: float) -> bytes:
    return pack(np.array([values], dtype=np.float32))[0]


def test_the_best_by_words_are_rescored_by_meaning() -> None:
    index = TantivyIndex()
    index.add(
        [
            Doc("u1", 0, ["adopt", "polici"], vector=_vector(1, 0, 0)),
            Doc("u2", 0, ["adopt", "puppi"], vector=_vector(0, 1, 0.2)),
        ]
    )
    query = np.array([0, 1, 0], dtype=np.float32)

    def units(**options: Any) -> list[str | None]:
        return [h.place[0] for h in index.search(Search(["adopt"], **options))]

    assert units() == ["u1", "u2"]  # a tie: the order they were added in
    assert units(vector=query) == ["u2", "u1"]
    assert units(vector=np.array([0, 1], dtype=np.float32)) == ["u1", "u2"]  # another model
    plain = TantivyIndex(scoring=Scoring(dense_weight=0))
    plain.add([Doc("u1", 0, ["adopt"], vector=_vector(1, 0)), Doc("u2", 0, ["adopt"])])
    found = plain.search(Search(["adopt"], vector=query[:2]))
    assert [h.place[0] for h in found] == ["u1", "u2"]


def test_vectors_are_signed_bytes_whose_cosines_survive_packing() -> None:
    rows = np.random.default_rng(7).normal(size=(50, 128)).astype(np.float32)
    packed = pack(rows)
    assert {len(p) for p in packed} == {128}
    back = np.stack([np.frombuffer(p, dtype=np.int8).astype(np.float32) for p in packed])
    cosine = (back * rows).sum(1) / np.linalg.norm(back, axis=1) / np.linalg.norm(rows, axis=1)
    assert cosine.min() > 0.999
    assert pack(np.zeros((1, 4), dtype=np.float32)) == [bytes(4)]


STATIC_TEXTS = [
    "",
    "   ",
    "We adopted a puppy called Rex",
    "  two  spaces  and\ttabs\nand lines ",
    "记忆 中文测试",
    "🙂 café naïve",
    "▁already▁marked▁",
    "x" * 3000,
    "ok",
    "We adopted a puppy called Rex",  # chunks seen before
]


@pytest.mark.parametrize("chunked", [True, False])
def test_the_static_vectors_are_the_models_own_mean_of_token_vectors(
    chunked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether from remembered chunks or not, the embedder gives the vectors
    WordLlama's own `embed` gives, a text without any
    token included - and still does after its chunks were forgotten."""
    static = StaticEmbedder()
    static.warm()
    assert static._chunks is not None  # the shipped tokenizer has the shape chunks need
    if not chunked:
        static._chunks = None
    monkeypatch.setattr(chunk_vectors, "MOST_CHUNKS", 8)  # forgotten again and again,
    monkeypatch.setattr(chunk_vectors, "MOST_CHARS", 2000)  # by count or by size
    theirs = np.asarray(static.wordllama().embed(STATIC_TEXTS, norm=False), dtype=np.float32)
    for _ in range(2):
        ours = static.embed(STATIC_TEXTS)
        assert ours.shape == theirs.shape == (len(STATIC_TEXTS), static.dimensions)
        assert np.abs(ours - theirs).max() < 1e-6
    assert not ours[0].any()
    assert static.embed([]).shape == (0, static.dimensions)


def test_chunks_are_used_only_with_a_tokenizer_of_that_shape() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    split_first = Tokenizer(models.BPE())
    split_first.pre_tokenizer = pre_tokenizers.Whitespace()
    assert not chunk_vectors.fits(split_first)
    static = StaticEmbedder()
    assert chunk_vectors.fits(static.wordllama().tokenizer)


def _two_adoptions(memory: PartnerMemory) -> None:
    memory.record_messages(
        [
            Message("user", "We adopted the travel policy"),
            Message("assistant", "Noted, thanks for telling me"),
            Message("user", "Anything else on your mind today"),
            Message("assistant", "Let me check my calendar first"),
            Message("user", "We adopted a puppy called Rex"),
        ]
    )
    memory.roll_now()
    memory.wait()


def test_the_static_model_brings_the_closer_meaning_first(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _two_adoptions(memory)
        rows = store.recall_rows("agent", -1, store.recall_state("agent", RECALL_CONSUMER).head)
        assert {len(r.vector or b"") for r in rows} == {128}
        state = store.recall_state("agent", RECALL_CONSUMER)
        assert state.embedder == StaticEmbedder().name
        query = "adopting a dog"
        words = RecallEngine(store).recall("agent", query, k=2)
        assert "policy" in words.hits[0].message.content  # by words alone: a tie
        found = memory.recall(query, k=2)
        assert "puppy" in found.hits[0].message.content


def test_vectors_from_an_embeddings_endpoint(store: MemoryStore, fake_llm: Any) -> None:
    endpoint = EmbeddingSettings("endpoint", fake_llm.base_url, "toy", max_retries=0)
    with PartnerMemory(store, "agent", idle_timer=False, embeddings=endpoint) as memory:
        _two_adoptions(memory)
        state = store.recall_state("agent", RECALL_CONSUMER)
        assert state.embedder == "endpoint:toy"
        rows = store.recall_rows("agent", -1, state.head)
        assert {len(r.vector or b"") for r in rows} == {26}  # the toy model's size
        assert any(r["path"].endswith("/embeddings") for r in fake_llm.requests)
        memory.record_messages([Message("user", "A puppy needs walks")])  # the window
        assert memory.recall("puppy", k=5).hits
        fake_llm.embeddings_status = 500  # the endpoint fails: words still recall
        memory.record_messages([Message("user", "Rex chewed a shoe")])
        found = memory.recall("puppy shoe", k=5)
        assert {"Rex chewed a shoe", "We adopted a puppy called Rex"} <= {
            h.message.content for h in found.hits
        }


def test_another_embedder_searches_by_words_until_reindexed(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _two_adoptions(memory)
    with PartnerMemory(store, "agent", idle_timer=False, embeddings=OFF) as other:
        assert other.recall("puppy", k=1).hits[0].message.content.endswith("Rex")
        other.record_messages(
            [Message("user", "The puppy sleeps a lot"), Message("assistant", "Puppies do")]
        )
        other.roll_now()
        other.wait()
        state = store.recall_state("agent", RECALL_CONSUMER)
        newest = store.recall_rows("agent", state.head - 1, state.head)
        assert len(newest) == 2
        assert all(r.vector is None for r in newest)  # never mixed with the static vectors
        assert state.embedder == StaticEmbedder().name
        assert other.service.reindex("agent") == 7
        state = store.recall_state("agent", RECALL_CONSUMER)
        assert state.embedder == "none"
        assert all(r.vector is None for r in store.recall_rows("agent", -1, state.head))
    with PartnerMemory(store, "agent", idle_timer=False) as memory:  # static again: words
        assert memory.recall("puppy sleeps", k=1).hits[0].message.content.endswith("lot")


@pytest.mark.parametrize(
    ("environ", "kind"),
    [
        ({}, "static"),
        ({"PARTNER_MEMORY_EMBEDDINGS": "OFF"}, "off"),
        (
            {
                "PARTNER_MEMORY_EMBEDDINGS_BASE_URL": "http://127.0.0.1:9/v1",
                "PARTNER_MEMORY_EMBEDDINGS_MODEL": "m",
            },
            "endpoint",
        ),
    ],
)
def test_embedding_settings_from_the_environment(environ: dict[str, str], kind: str) -> None:
    settings = EmbeddingSettings.from_env(environ)
    assert settings.kind == kind
    assert (settings.embedder() is None) == (kind == "off")


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"PARTNER_MEMORY_EMBEDDINGS": "bert"}, "PARTNER_MEMORY_EMBEDDINGS must be"),
        ({"PARTNER_MEMORY_EMBEDDINGS": "endpoint"}, "PARTNER_MEMORY_EMBEDDINGS_BASE_URL"),
        (
            {"PARTNER_MEMORY_EMBEDDINGS_BASE_URL": "http://127.0.0.1:9/v1"},
            "PARTNER_MEMORY_EMBEDDINGS_MODEL",
        ),
    ],
)
def test_bad_embedding_settings_name_the_variable(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        EmbeddingSettings.from_env(environ)


def test_warming_loads_the_static_model_but_never_calls_an_endpoint(fake_llm: Any) -> None:
    static = StaticEmbedder()
    assert not static.loaded
    static.warm()
    assert static.loaded
    assert static._model is None  # read from the wheel's files, wordllama not imported
    EmbeddingSettings("endpoint", fake_llm.base_url, "toy", max_retries=0).embedder().warm()
    assert not fake_llm.requests  # the endpoint may not be up when a server starts
