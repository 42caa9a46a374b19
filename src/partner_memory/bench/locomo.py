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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from partner_memory.bench.scores import (
    KS,
    EvidenceReport,
    Tally,
    choose_on_folds,
    paired,
    plain_bm25,
    timed,
)
from partner_memory.errors import InvalidInputError
from partner_memory.ingest import ReplayClock, ingest, read_transcript
from partner_memory.memory import PartnerMemory
from partner_memory.recall.analyze import terms
from partner_memory.recall.embed import EmbeddingSettings
from partner_memory.recall.engine import RecallEngine
from partner_memory.recall.searcher import Search
from partner_memory.store.contract.base import MemoryStore

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


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
    fusion_grid: Sequence[float] = (),
) -> EvidenceReport:
    """`fusion_grid`: also ask each question with each of these weights of the order by
    meaning (`Search.fusion`), and choose one leaving each conversation out."""
    files = sorted(directory.glob("*.json"))
    if not files:
        raise InvalidInputError(f"{directory}: no LoCoMo conversation (*.json) files")
    ours, words, baseline = Tally(), Tally(), Tally()
    by_words = RecallEngine(store)  # no embedder: the namespace's vectors go unused
    tried = {w: Tally() for w in fusion_grid}
    for path in files:
        if progress:
            progress(path.name)
        transcript = read_transcript(path, "locomo")
        clock = ReplayClock()
        plain = plain_bm25(transcript.messages)
        turn = [str(m.metadata.get("dia_id")) for m in transcript.messages]
        with PartnerMemory(
            store, path.stem, clock=clock, idle_timer=False, embeddings=embeddings
        ) as memory:
            ingest(memory, transcript, clock)
            memory.wait()
            analysis = memory.service.analysis
            weighted = {w: RecallEngine(store, analysis, fusion=w) for w in fusion_grid}
            for category, question, evidence in _questions(path):
                found, spent = timed(memory.recall, question, k=max(KS))
                ranked = [str(h.message.metadata.get("dia_id")) for h in found.hits]
                ours.add(path.stem, category, evidence, ranked, spent)
                found, spent = timed(by_words.recall, path.stem, question, k=max(KS))
                ranked = [str(h.message.metadata.get("dia_id")) for h in found.hits]
                words.add(path.stem, category, evidence, ranked, spent)
                hits, spent = timed(plain.search, Search(terms(question), k=max(KS)))
                ranked = [turn[int(str(h.place[0]))] for h in hits]
                baseline.add(path.stem, category, evidence, ranked, spent)
                for w, engine in weighted.items():
                    found = engine.recall(path.stem, question, k=max(KS), activate=False)
                    ranked = [str(h.message.metadata.get("dia_id")) for h in found.hits]
                    tried[w].add(path.stem, category, evidence, ranked, 0.0)
    return EvidenceReport(
        len(files),
        len(ours.rows),
        [ours.score("recall"), words.score("recall, words"), baseline.score("BM25 turns")],
        paired(ours, words, ("recall", "recall, words"))
        + paired(ours, baseline, ("recall", "BM25 turns")),
        choose_on_folds(tried) if tried else [],
    )
