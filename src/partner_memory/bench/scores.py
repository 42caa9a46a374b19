"""Evidence recall scores shared by the benchmarks: per question, per k, per category,
per conversation (the folds), and paired intervals between two systems."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from partner_memory.model import Message, Record
from partner_memory.recall.analyze import analyze
from partner_memory.recall.searcher import Doc
from partner_memory.recall.tantivy_index import Scoring, TantivyIndex

KS = (5, 10, 25)
T = TypeVar("T")


def plain_bm25(messages: Sequence[Message]) -> TantivyIndex:
    """The baseline: BM25 over single messages with recall's analysis, each message a
    unit of its own (hit `place[0]` is its index in `messages`)."""
    plain = TantivyIndex(scoring=Scoring.plain())
    plain.add([Doc(str(i), 0, analyze(m)[1].split()) for i, m in enumerate(messages)])
    return plain


def timed(call: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """`call(*args, **kwargs)`'s result and the milliseconds it took."""
    began = time.perf_counter()
    result = call(*args, **kwargs)
    return result, (time.perf_counter() - began) * 1000


@dataclass(slots=True)
class SystemScore(Record):
    """One system's evidence recall: per k (as text), per category name and "all"."""

    name: str
    recall_at: dict[str, dict[str, float]] = field(default_factory=dict)
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    #: R@10 of each conversation (each a fold: nothing is fitted to the others).
    by_conversation: dict[str, float] = field(default_factory=dict)
    #: Each question's share of evidence in the top 10, in the order asked.
    shares: list[float] = field(default_factory=list)


@dataclass(slots=True)
class Paired(Record):
    """Mean difference of two systems' per-question R@10, with its 95 % interval."""

    first: str
    second: str
    conversation: str
    mean: float
    low: float
    high: float


@dataclass(slots=True)
class FoldChoice(Record):
    """A constant chosen on the other conversations (best mean R@10 there), and what it
    scores on this one, held out."""

    conversation: str
    chosen: float
    held_out: float
    #: The other conversations' R@10 for each value tried (what chose it).
    tuned: dict[str, float]


@dataclass(slots=True)
class EvidenceReport(Record):
    conversations: int
    questions: int
    systems: list[SystemScore]
    #: The first system against each other one, per conversation and over all.
    paired: list[Paired] = field(default_factory=list)
    #: A constant chosen leaving each conversation out (`choose_on_folds`), if asked.
    folds: list[FoldChoice] = field(default_factory=list)


@dataclass(slots=True)
class Tally:
    """What one system found, question by question."""

    rows: list[tuple[str, str, dict[int, float]]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    def add(
        self, conversation: str, category: str, evidence: set[str], ranked: list[str], ms: float
    ) -> None:
        self.latencies.append(ms)
        found = {k: len(evidence & set(ranked[:k])) / len(evidence) for k in KS}
        self.rows.append((conversation, category, found))

    def score(self, name: str) -> SystemScore:
        buckets: dict[int, dict[str, list[float]]] = {k: {} for k in KS}
        conversations: dict[str, list[float]] = {}
        for conversation, category, found in self.rows:
            for k in KS:
                for bucket in (category, "all"):
                    buckets[k].setdefault(bucket, []).append(found[k])
            conversations.setdefault(conversation, []).append(found[10])
        ordered = sorted(self.latencies)
        return SystemScore(
            name,
            {str(k): {c: sum(v) / len(v) for c, v in b.items()} for k, b in buckets.items()},
            statistics.median(ordered) if ordered else 0.0,
            ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))] if ordered else 0.0,
            {c: sum(v) / len(v) for c, v in conversations.items()},
            [found[10] for _, _, found in self.rows],
        )


def paired(first: Tally, second: Tally, names: tuple[str, str]) -> list[Paired]:
    """`first` - `second` per question (R@10), per conversation and over all ("all")."""
    groups: dict[str, list[float]] = {}
    for (conversation, _, a), (_, _, b) in zip(first.rows, second.rows, strict=True):
        for group in (conversation, "all"):
            groups.setdefault(group, []).append(a[10] - b[10])
    result = []
    for group, differences in groups.items():
        mean = sum(differences) / len(differences)
        spread = statistics.stdev(differences) if len(differences) > 1 else 0.0
        half = 1.96 * spread / math.sqrt(len(differences))
        result.append(Paired(names[0], names[1], group, mean, mean - half, mean + half))
    return result


def choose_on_folds(tallies: dict[float, Tally]) -> list[FoldChoice]:
    """For each conversation: the value whose questions of the other conversations have
    the best mean R@10 (the smallest on a tie), and that value's R@10 on it."""
    choices = []
    values = sorted(tallies)
    conversations = list(dict.fromkeys(c for c, _, _ in tallies[values[0]].rows))
    for held in conversations:
        tuned = {}
        for value in values:
            others = [f[10] for c, _, f in tallies[value].rows if c != held]
            tuned[value] = sum(others) / max(1, len(others))
        chosen = max(values, key=lambda v: (tuned[v], -v))
        mine = [f[10] for c, _, f in tallies[chosen].rows if c == held]
        choices.append(
            FoldChoice(
                held, chosen, sum(mine) / max(1, len(mine)), {str(v): tuned[v] for v in values}
            )
        )
    return choices
