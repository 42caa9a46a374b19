"""Ranking on pools made by hand, without an index; and the one BM25.

`ranking.rank` orders candidates from their columns alone, so each rule is
checked here on a few rows: the words' score, the session (block) score, the
speaker and date boosts, meaning's rescoring and a gathering question's
spread. `ranking.bm25` is the formula the window's messages are scored with;
it must be tantivy's, so a message scores the same before and after it is
stored.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from partner_memory.recall.index_layout import hash_number
from partner_memory.recall.ranking import LEAD, Pool, Scoring, bm25, rank
from partner_memory.recall.searcher import Doc, Search
from partner_memory.recall.tantivy_index import TantivyIndex

WORDS_ONLY = Scoring(unit_weight=0.0, speaker_boost=1.0, dense_weight=0.0, spread=1.0)


def _pool(
    score: list[float],
    *,
    block: list[int] | None = None,
    time: list[int | None] | None = None,
    speaker: list[str | None] | None = None,
) -> Pool:
    n = len(score)
    return Pool.of(
        score=score,
        block=block or [1] * n,
        time=time or [None] * n,
        speaker=[None if s is None else hash_number(s) for s in (speaker or [None] * n)],
        vecno=[None] * n,
        address=[None] * n,
        place=[(None, i) for i in range(n)],
        near=[None] * n,
    )


def _none(best: np.ndarray) -> np.ndarray | None:
    return None


def _order(pool: Pool, search: Search, scoring: Scoring, **blocks: float) -> list[int]:
    scores = {int(k.removeprefix("b")): v for k, v in blocks.items()}
    return [i for i, _ in rank(pool, search, scoring, blocks=scores, vectors=_none)]


def test_words_alone_rank_by_score_and_keep_order_among_equals() -> None:
    pool = _pool([1.0, 3.0, 2.0, 3.0])
    assert _order(pool, Search(["x"], k=3), WORDS_ONLY) == [1, 3, 2]


def test_a_session_score_lifts_its_messages() -> None:
    pool = _pool([1.0, 1.2], block=[7, 8])
    scoring = Scoring(speaker_boost=1.0, dense_weight=0.0, spread=1.0, unit_weight=0.3)
    assert _order(pool, Search(["x"], k=2), scoring, b7=10.0, b8=1.0) == [0, 1]
    assert _order(pool, Search(["x"], k=2), scoring, b7=1.0, b8=10.0) == [1, 0]


def test_the_speaker_named_and_the_date_named_count_more() -> None:
    pool = _pool([1.0, 1.5], speaker=["ann", "bob"], time=[100, 5])
    scoring = Scoring(unit_weight=0.0, dense_weight=0.0, spread=1.0)
    assert _order(pool, Search(["x"], k=2, speaker="Ann"), scoring) == [0, 1]
    assert _order(pool, Search(["x"], k=2, prefer=(50, 200)), scoring) == [0, 1]
    assert _order(pool, Search(["x"], k=2, prefer=(0, 50)), scoring) == [1, 0]


def test_meaning_rescoring_brings_up_the_nearer_message() -> None:
    pool = _pool([1.0, 0.9])
    question = np.array([1.0, 0.0], dtype=np.float32)
    rows = {0: [0.0, 1.0], 1: [1.0, 0.0]}

    def vectors(best: np.ndarray) -> np.ndarray:
        return np.array([rows[int(i)] for i in best], dtype=np.float32)

    scoring = Scoring(unit_weight=0.0, speaker_boost=1.0, spread=1.0, feedback=0.0)
    search = Search(["x"], k=2, vector=question)
    ranked = rank(pool, search, scoring, blocks={}, vectors=vectors)
    assert [i for i, _ in ranked] == [1, 0]
    assert rank(pool, search, scoring, blocks={}, vectors=_none)[0][0] == 0


def test_a_gathering_question_spreads_over_sessions() -> None:
    """Among the candidates meaning rescores (with a question vector), a session's
    second hit gives way to another session's."""
    pool = _pool([1.0, 0.95, 0.9], block=[1, 1, 2])
    scoring = Scoring(unit_weight=0.0, speaker_boost=1.0, spread=0.75)
    question = np.ones(2, dtype=np.float32)
    assert _order(pool, Search(["x"], k=2, vector=question), scoring) == [0, 1]
    assert _order(pool, Search(["x"], k=2, vector=question, spread=True), scoring) == [0, 2]


@pytest.mark.parametrize("word", ["kyoto", "trip", "tea"])
def test_the_window_is_scored_with_tantivys_own_bm25(word: str) -> None:
    """`bm25` over the index's statistics (its state is a document of it, counted as
    the window's scoring counts it) gives tantivy's scores, in ratio (a search's
    scores are over its best): a window message ranks as it will once stored."""
    texts = [
        "kyoto trip in may",
        "tea with ann",
        "the trip to kyoto kyoto again",
        "green tea tea tea",
        "a trip for tea in kyoto at last",
    ]
    index = TantivyIndex(scoring=Scoring.plain())
    index.add([Doc(str(i), 0, t.split()) for i, t in enumerate(texts)])
    documents = len(texts) + 1
    average = sum(len(t.split()) for t in texts) / documents
    df = sum(word in t.split() for t in texts)
    expected = {
        str(i): bm25(t.split().count(word), len(t.split()), average, documents, df)
        for i, t in enumerate(texts)
        if word in t.split()
    }
    best = max(expected.values())
    found = {str(h.place[0]): h.score for h in index.search(Search([word], k=10))}
    assert found == pytest.approx({u: v / best for u, v in expected.items()}, rel=1e-5)


@pytest.mark.parametrize(("fusion", "first"), [(0.0, 0), (1.0, 2)])
def test_a_message_found_by_meaning_alone_leads_when_the_fusion_says(
    fusion: float, first: int
) -> None:
    """Candidate 2 shares no word (score 0) but means the question best: meaning's
    rescoring alone leaves it behind the words' best; with `Search.fusion` 1 it leads."""
    pool = _pool([3.0, 1.0, 0.0]).meaning({2: 0.9})
    vectors = np.array([[0.0, 1.0], [0.6, 0.8], [1.0, 0.0]], dtype=np.float32)
    search = Search(["x"], k=3, vector=np.array([1.0, 0.0], dtype=np.float32), fusion=fusion)
    scoring = Scoring(unit_weight=0.0, speaker_boost=1.0, feedback=0.0, spread=1.0)
    ranked = rank(pool, search, scoring, blocks={}, vectors=lambda best: vectors[best])
    assert ranked[0][0] == first
    assert sorted(i for i, _ in ranked) == [0, 1, 2]


def test_fusion_leads_with_the_nearest_read_alone_and_statements_before_questions() -> None:
    """The lead is chosen by each one's own cosine (`Pool.meant`), whether its words (or
    its neighbours') found it too or not, `LEAD` of them at most; one that only asks
    comes after the statements (a question is nearest another question)."""
    score = [5.0, 4.0, 3.0, 0.5, 0.0, 0.0, 0.0, 0.0]
    near = {3: 0.95, 4: 0.9, 5: 0.97, 6: 0.8, 7: 0.7}
    asks = [False] * 5 + [True] + [False] * 2
    pool = replace(_pool(score).meaning(near), asks=np.array(asks))
    vectors = np.eye(len(score), dtype=np.float32)
    search = Search(["x"], k=8, vector=np.ones(len(score), dtype=np.float32), fusion=1.0)
    scoring = Scoring(unit_weight=0.0, speaker_boost=1.0, feedback=0.0, spread=1.0)
    ranked = [i for i, _ in rank(pool, search, scoring, blocks={}, vectors=lambda b: vectors[b])]
    lead = [3, 4, 6, 7, 5][:LEAD]  # found by a neighbour's word (3) or by meaning alone
    assert ranked[:LEAD] == lead
    assert ranked[LEAD : LEAD + 3] == [0, 1, 2]  # then the words' best, as they were
    unfused = rank(
        pool, replace(search, fusion=0.0), scoring, blocks={}, vectors=lambda b: vectors[b]
    )
    assert [i for i, _ in unfused][:3] == [0, 1, 2]
