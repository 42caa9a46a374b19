"""Hostile input: one long message costs bounded memory and never stops recall."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from partner_memory import Message, PartnerMemory
from partner_memory.recall.embed import (
    EMBED_BATCH,
    EMBED_MESSAGE_CHARS,
    EMBED_PIECE_CHARS,
    EmbeddingSettings,
    StaticEmbedder,
    embed_bounded,
    unit_rows,
)
from partner_memory.recall.indexer import RECALL_CONSUMER
from partner_memory.rolling import ChatClient, LLMCompressor, LLMSettings, UsageMeter
from partner_memory.rolling.compress import COMPRESS_INPUT_CHARS
from partner_memory.store import MemoryStore

ROOT = Path(__file__).resolve().parent.parent
#: Address space the worker may take: the unbounded embedder needed 5-9 GiB here.
LIMIT_MIB = 1500
#: Peak RSS allowed: the process holds ~120 MiB before the first message.
PEAK_MIB = 450


def _worker(tmp_path: Path, *scenario: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.long_message_worker",
            str(tmp_path / "m.db"),
            *scenario,
            str(LIMIT_MIB),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "is indexed by words only" not in done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("scenario", ["window", "turn"])
def test_a_long_message_is_recorded_and_recalled_in_bounded_memory(
    tmp_path: Path, scenario: str
) -> None:
    """A 100,000-character message among 60, or a 400 KB turn: bounded peak, found by words."""
    result = _worker(tmp_path, scenario)
    assert result["failures"] == 0
    assert result["found"]["zanzibar"] > 0
    assert result["found"]["kyoto"] > 0
    assert result["peak_mib"] < PEAK_MIB, result


def test_ingesting_long_messages_stays_bounded(tmp_path: Path) -> None:
    """The CLI ingests 20 messages of 1.4 MB each: all stored, all indexed, bounded peak."""
    transcript = tmp_path / "big.jsonl"
    filler = "alpha beta gamma delta. " * (1_400_000 // 24)
    with transcript.open("w") as out:
        for i in range(20):
            word = "zanzibar" if i == 3 else "kyoto"
            role = "user" if i % 2 == 0 else "assistant"
            out.write(json.dumps({"role": role, "content": f"{word} {filler}"}) + "\n")
    result = _worker(tmp_path, "ingest", str(transcript))
    assert result["failures"] == 0
    assert result["found"]["zanzibar"] > 0
    assert result["found"]["kyoto"] > 0
    assert result["peak_mib"] < PEAK_MIB, result


class Recording:
    """An embedder that keeps the batches it was given (vectors: the text's length)."""

    name = "recording"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def warm(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.asarray([[len(t), 1.0] for t in texts], dtype=np.float32)


def test_embedding_reads_bounded_pieces_in_bounded_batches() -> None:
    """Only a text's first EMBED_MESSAGE_CHARS, in pieces, at most EMBED_BATCH per call."""
    recording = Recording()
    texts = ["short", "x" * 1_000_000, "", "y" * (EMBED_PIECE_CHARS + 1)]
    vectors = embed_bounded(recording, texts)
    assert vectors.shape == (4, 2)
    pieces = [p for batch in recording.batches for p in batch]
    assert max(len(b) for b in recording.batches) <= EMBED_BATCH
    assert max(len(p) for p in pieces) <= EMBED_PIECE_CHARS
    assert sum(len(p) for p in pieces) == 5 + EMBED_MESSAGE_CHARS + EMBED_PIECE_CHARS + 1
    assert vectors[0].tolist() == [5.0, 1.0]  # one piece: its own vector
    assert vectors[2].tolist() == [0.0, 1.0]
    # a long text's vector is its pieces' mean, weighted by their length
    assert vectors[3].tolist() == pytest.approx(
        [(EMBED_PIECE_CHARS**2 + 1) / (EMBED_PIECE_CHARS + 1), 1.0]
    )


def test_a_long_text_means_what_its_whole_says() -> None:
    """For the static model, pieces weighted by length give (almost) the whole's vector."""
    model = StaticEmbedder()
    text = " ".join(f"we walked the dog {i} times near the river" for i in range(200))
    assert EMBED_PIECE_CHARS < len(text) < EMBED_MESSAGE_CHARS
    whole, pieced = unit_rows(np.vstack([model.embed([text]), embed_bounded(model, [text])]))
    assert float(whole @ pieced) > 0.99


def test_texts_the_endpoint_refuses_are_indexed_by_words(store: MemoryStore, fake_llm: Any) -> None:
    """A 4xx from the embeddings endpoint is not retried for ever: words index the messages."""
    endpoint = EmbeddingSettings("endpoint", fake_llm.base_url, "toy", max_retries=0)
    fake_llm.embeddings_status = 400
    with PartnerMemory(store, "agent", idle_timer=False, embeddings=endpoint) as memory:
        memory.record_turn("We adopted a puppy called Rex", "Congratulations")
        memory.roll_now()
        memory.wait()
        state = store.recall_state("agent", RECALL_CONSUMER)
        assert state.indexed == state.head == 1
        assert all(r.vector is None for r in store.recall_rows("agent", -1, state.head))
        (status,) = [c for c in store.consumer_status("agent") if c.name == RECALL_CONSUMER]
        assert status.failures == 0
        assert memory.recall("puppy").hits


def test_the_llm_compressor_sees_a_bounded_body(fake_llm: Any) -> None:
    """A pasted document is cut to COMPRESS_INPUT_CHARS (head and tail) before the LLM."""
    compressor = LLMCompressor(
        ChatClient(LLMSettings(base_url=fake_llm.base_url, model="m", max_retries=0))
    )
    body = "The start. " + "filler words here. " * 50_000 + "The end."
    fake_llm.script.append(("ok", "brief"))
    (out,) = compressor.compress([Message("user", body)], UsageMeter())
    assert out.text == "brief"
    (request,) = fake_llm.requests
    sent = "".join(m["content"] for m in request["body"]["messages"])
    assert "The start." in sent
    assert "The end." in sent
    assert len(sent) < COMPRESS_INPUT_CHARS + 2_000
