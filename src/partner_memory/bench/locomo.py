"""Evidence recall on LoCoMo-format conversations, through the whole pipeline.

Each conversation is ingested into its own namespace (replayed with its own
dates, rolled and indexed as live memory would be); then every question of
categories 1-4 is asked of `recall`, and a question scores the share of its
evidence turns among the top k. Beside it, in the same run, the same recall
by words alone (no vectors) and plain BM25 over single turns with the same
analysis, so the figures say what meaning and the rest add.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from partner_memory.errors import InvalidInputError
from partner_memory.ingest import ReplayClock, ingest, read_transcript
from partner_memory.memory import PartnerMemory
from partner_memory.model import Record
from partner_memory.recall.analyze import analyze, terms
from partner_memory.recall.embed import EmbeddingSettings
from partner_memory.recall.engine import RecallEngine
from partner_memory.recall.searcher import Doc, Search
from partner_memory.recall.tantivy_index import Scoring, TantivyIndex
from partner_memory.store.contract.base import MemoryStore

KS = (5, 10, 25)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(slots=True)
class SystemScore(Record):
    """One system's evidence recall: per k (as text), per category name and "all"."""

    name: str
    recall_at: dict[str, dict[str, float]] = field(default_factory=dict)
    p50_ms: float = 0.0
    p99_ms: float = 0.0


@dataclass(slots=True)
class LocomoReport(Record):
    conversations: int
    questions: int
    systems: list[SystemScore]


@dataclass(slots=True)
class _Tally:
    found: dict[int, dict[str, list[float]]] = field(default_factory=lambda: {k: {} for k in KS})
    latencies: list[float] = field(default_factory=list)

    def add(self, category: str, evidence: set[str], ranked: list[str], ms: float) -> None:
        self.latencies.append(ms)
        for k in KS:
            share = len(evidence & set(ranked[:k])) / len(evidence)
            for bucket in (category, "all"):
                self.found[k].setdefault(bucket, []).append(share)

    def score(self, name: str) -> SystemScore:
        ordered = sorted(self.latencies)
        return SystemScore(
            name,
            {
                str(k): {c: sum(v) / len(v) for c, v in buckets.items()}
                for k, buckets in self.found.items()
            },
            statistics.median(ordered) if ordered else 0.0,
            ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] if ordered else 0.0,
        )


def _questions(path: Path) -> Iterable[tuple[str, str, set[str]]]:
    try:
        document = json.loads(path.read_text("utf-8"))
        qa = document["qa"]
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"{path.name}: no LoCoMo question list ({exc})") from None
    for item in qa:
        category = item.get("category") if isinstance(item, dict) else None
        if category not in CATEGORIES or not item.get("evidence"):
            continue
        evidence = {e.strip() for ev in item["evidence"] for e in str(ev).split(";") if e.strip()}
        yield CATEGORIES[category], str(item["question"]), evidence


def run_locomo(
    store: MemoryStore,
    directory: Path,
    *,
    progress: Callable[[str], None] | None = None,
    embeddings: EmbeddingSettings | None = None,
) -> LocomoReport:
    files = sorted(directory.glob("*.json"))
    if not files:
        raise InvalidInputError(f"{directory}: no LoCoMo conversation (*.json) files")
    ours, words, baseline = _Tally(), _Tally(), _Tally()
    by_words = RecallEngine(store)  # no embedder: the namespace's vectors go unused
    questions = 0
    for path in files:
        if progress:
            progress(path.name)
        transcript = read_transcript(path, "locomo")
        clock = ReplayClock()
        plain = TantivyIndex(scoring=Scoring.plain())  # each turn a unit of its own
        plain.add(
            [Doc(str(i), 0, analyze(m)[1].split()) for i, m in enumerate(transcript.messages)]
        )
        turn = [str(m.metadata.get("dia_id")) for m in transcript.messages]
        with PartnerMemory(
            store, path.stem, clock=clock, idle_timer=False, embeddings=embeddings
        ) as memory:
            ingest(memory, transcript, clock)
            memory.wait()
            for category, question, evidence in _questions(path):
                questions += 1
                began = time.perf_counter()
                found = memory.recall(question, k=max(KS))
                spent = (time.perf_counter() - began) * 1000
                ranked = [str(h.message.metadata.get("dia_id")) for h in found.hits]
                ours.add(category, evidence, ranked, spent)
                began = time.perf_counter()
                found = by_words.recall(path.stem, question, k=max(KS))
                spent = (time.perf_counter() - began) * 1000
                ranked = [str(h.message.metadata.get("dia_id")) for h in found.hits]
                words.add(category, evidence, ranked, spent)
                began = time.perf_counter()
                hits = plain.search(Search(terms(question), k=max(KS)))
                spent = (time.perf_counter() - began) * 1000
                ranked = [turn[int(str(h.place[0]))] for h in hits]
                baseline.add(category, evidence, ranked, spent)
    return LocomoReport(
        len(files),
        questions,
        [ours.score("recall"), words.score("recall, words"), baseline.score("BM25 turns")],
    )
