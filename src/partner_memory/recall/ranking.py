"""Ranking: pure numpy over a pool of candidates, the weights, and the one BM25.

The index (`recall.tantivy_index`) gathers candidates - by words (tantivy's
BM25), by meaning, and the window's, scored by `bm25` with the index's own
statistics, so a message scores the same in the window as once stored - and
this module orders them. Nothing here opens an index: `rank` is tested on
pools made by hand. Each tuned constant says where it was chosen (data set,
folds, figure).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from partner_memory.recall.index_layout import NEIGHBOURS, NO_TIME, hash_number
from partner_memory.recall.searcher import Place, Search

if TYPE_CHECKING:
    import numpy as np

#: Weight of the block (session) score next to the message's own. LoCoMo dev, all five
#: conversations, no folds: carried from the scorer this index replaced (79.4 % R@10).
UNIT_WEIGHT = 0.3
#: Messages of the one participant a query names count this much more (as UNIT_WEIGHT).
SPEAKER_BOOST = 2.0
#: Messages said when a query's date names score this much more (as UNIT_WEIGHT).
DATE_BOOST = 1.5
#: A gathering question's hit counts this much less for each better one of its session
#: (LoCoMo dev R@10: multi-hop 47.2 -> 51.8, the other categories unchanged; 0.5-0.9
#: measured, 80.1-80.6 overall).
SPREAD = 0.75
#: Candidates by words the boosts are applied to (150-800 measured alike on LoCoMo dev).
POOL = 150
#: Messages rescored by meaning, and the weight of the cosine (from 0 at the least of them
#: to 1 at the most, `scaled`).
DENSE_CANDIDATES, DENSE_WEIGHT = 100, 1.0
#: Meaning's pseudo-relevance feedback (Rocchio): the question's vector plus this weight
#: times the mean of the best few candidates' that its words found too (after a first
#: rescoring), then the cosines again. With the dense weight 0.5 -> 1.0, LoCoMo dev R@10
#: 80.6 -> 81.1 (80.5 without the feedback; 80.9-81.2 over weights 0.4-0.6, 3-5
#: candidates, dense weights 0.8-1.2). A question whose words find nothing (a paraphrase)
#: is not moved: towards what merely resembles it, it lost its answer.
FEEDBACK, FEEDBACK_WEIGHT = 4, 0.5
#: The cosines' spread is scaled as at least this wide: among a few candidates a small
#: difference in meaning does not outweigh the words and a date the question names.
MEANING_SPREAD = 0.4
#: Messages found by meaning alone (sharing no word with the question) added to those
#: rescored: the nearest among the stored ones (`recall.vector_graph`) and the window's.
MEANING_CANDIDATES = 20
#: Messages nearest the question's meaning that fusion raises: with k 5, two places stay
#: the words'. Not tuned: LoCoMo dev folds cost 0.2 (1), 1.1 (2) and 2.4 (3) points of R@10
#: if meaning led on every question; it leads on ~21 % of them, each lead nearer than the
#: words' best (`TantivyIndex._with_meaning`).
LEAD = 3
#: tantivy's BM25 constants (the window's messages are scored with the same).
K1, B = 1.2, 0.75


@dataclass(frozen=True, slots=True)
class Scoring:
    """The weights; the defaults are what measured best. `Scoring.plain()` is BM25
    over single messages (the baseline `bench locomo` prints beside it)."""

    neighbours: int = NEIGHBOURS
    unit_weight: float = UNIT_WEIGHT
    speaker_boost: float = SPEAKER_BOOST
    date_boost: float = DATE_BOOST
    dense_weight: float = DENSE_WEIGHT
    feedback: float = FEEDBACK_WEIGHT
    spread: float = SPREAD

    @classmethod
    def plain(cls) -> Scoring:
        return cls(
            neighbours=0,
            unit_weight=0.0,
            speaker_boost=1.0,
            dense_weight=0.0,
            feedback=0.0,
            spread=1.0,
        )


@dataclass(slots=True)
class Pool:
    """Candidates of a search, column by column: the stored ones first (each read from
    its `address` only when chosen), then the window's (whose place is known)."""

    score: np.ndarray
    block: np.ndarray
    time: np.ndarray
    speaker: np.ndarray
    #: The stored ones' rows of vectors (-1: none).
    vecno: np.ndarray
    address: list[Any]
    place: list[Place | None]
    near: list[bytes | None]
    #: Each one's cosine with the question read alone, where it is among the nearest by
    #: meaning (-inf elsewhere): what fusion's lead is chosen by.
    meant: np.ndarray
    #: Whether it only asks (a question is nearest another question, not its answer).
    asks: np.ndarray

    def __len__(self) -> int:
        return len(self.address)

    @staticmethod
    def empty() -> Pool:
        return Pool.of(
            score=[], block=[], time=[], speaker=[], vecno=[], address=[], place=[], near=[]
        )

    def meaning(self, cosine: Mapping[int, float]) -> Pool:
        """This pool with candidate `i`'s `meant` set to `cosine[i]`."""
        import numpy as np

        meant = self.meant.copy()
        for i, value in cosine.items():
            meant[i] = value
        return replace(self, meant=np.asarray(meant, dtype="float64"))

    def take(self, chosen: Sequence[int]) -> Pool:
        """These candidates, in this order."""
        import numpy as np

        at = np.asarray(chosen, dtype=np.intp)
        return Pool(
            self.score[at],
            self.block[at],
            self.time[at],
            self.speaker[at],
            self.vecno[at],
            [self.address[i] for i in chosen],
            [self.place[i] for i in chosen],
            [self.near[i] for i in chosen],
            self.meant[at],
            self.asks[at],
        )

    def __add__(self, other: Pool) -> Pool:
        import numpy as np

        return Pool(
            np.concatenate([self.score, other.score]),
            np.concatenate([self.block, other.block]),
            np.concatenate([self.time, other.time]),
            np.concatenate([self.speaker, other.speaker]),
            np.concatenate([self.vecno, other.vecno]),
            self.address + other.address,
            self.place + other.place,
            self.near + other.near,
            np.concatenate([self.meant, other.meant]),
            np.concatenate([self.asks, other.asks]),
        )

    @staticmethod
    def of(
        *,
        score: Sequence[float],
        block: Sequence[float | None],
        time: Sequence[float | None],
        speaker: Sequence[float | None],
        vecno: Sequence[float | None],
        address: list[Any],
        place: list[Place | None],
        near: list[bytes | None],
        meant: Sequence[float] | None = None,
        asks: Sequence[float | None] | None = None,
    ) -> Pool:
        import numpy as np

        return Pool(
            column(score, 0, "float64"),
            column(block, 0),
            column(time, NO_TIME),
            column(speaker, 0),
            column(vecno, -1),
            address,
            place,
            near,
            np.full(len(address), -np.inf) if meant is None else column(meant, 0, "float64"),
            np.zeros(len(address), bool) if asks is None else column(asks, 0, "bool"),
        )


def rank(
    pool: Pool,
    search: Search,
    scoring: Scoring,
    *,
    blocks: Mapping[int, float],
    vectors: Callable[[np.ndarray], np.ndarray | None],
) -> list[tuple[int, float]]:
    """The `search.k` best candidates of `pool` and their scores, best first.

    Pure: the words' scores are the pool's; `blocks` the blocks' (sessions') scores for
    the words, the window's under `WINDOW_BLOCK`; `vectors(best)` the unit vectors of
    those candidates (None when none has one). A candidate's score is its words' score
    over the best, plus `unit_weight` times its block's over the best block's, times
    the speaker and date boosts; the best are then rescored by meaning (with
    feedback); those found by meaning alone (closer to the question than anything its
    words found, `TantivyIndex._by_meaning`) are raised by `search.fusion` times the
    best score of those the words found (1: they lead); a gathering question's are
    spread over its sessions."""
    import numpy as np

    final = pool.score / (pool.score.max() or 1.0)
    if blocks:
        top = max(blocks.values()) or 1.0
        scores = np.array([blocks.get(int(b), 0.0) for b in pool.block]) / top
        final = final + scoring.unit_weight * scores
    if search.speaker is not None and scoring.speaker_boost != 1.0:
        named = pool.speaker == hash_number(search.speaker.lower())
        final = final * np.where(named, scoring.speaker_boost, 1.0)
    inside = preferred(pool, search)
    if inside is not None:
        final = final * np.where(inside, scoring.date_boost, 1.0)
    dense = search.vector is not None and scoring.dense_weight > 0
    size = min(len(pool), max(search.k, DENSE_CANDIDATES) if dense else search.k)
    best = np.lexsort((np.arange(len(final)), -final))[:size]
    if dense:  # and every one found by meaning alone
        best = np.concatenate([best, np.setdiff1d(np.flatnonzero(pool.score == 0), best)])
    best_score = final[best]
    if dense and search.vector is not None:
        matrix = vectors(best)
        if matrix is not None:
            question = unit_vector(search.vector)
            gained = scaled(matrix @ question)
            if scoring.feedback > 0:  # the question, moved towards its best answers
                first = best_score + scoring.dense_weight * gained
                leaders = np.lexsort((np.arange(len(first)), -first))[:FEEDBACK]
                leaders = leaders[pool.score[best][leaders] > 0]  # found by words too
                if len(leaders):
                    moved = question + scoring.feedback * matrix[leaders].mean(axis=0)
                    gained = scaled(matrix @ unit_vector(moved))
            best_score = best_score + scoring.dense_weight * gained
    if dense and search.fusion > 0:
        best_score = raised(best_score, pool.meant[best], pool.asks[best], search.fusion)
    ranked = np.lexsort((np.arange(len(best_score)), -best_score))
    if search.spread and scoring.spread != 1.0:
        ranked = spread(ranked, best_score, pool.block[best], scoring.spread, search.k)
    return [(int(best[i]), float(best_score[i])) for i in ranked[: search.k]]


def lead(meant: np.ndarray, asks: np.ndarray) -> np.ndarray:
    """The `LEAD` candidates nearest the question's meaning (`meant`, read alone), nearest
    first; those that only ask after the rest (a question is nearest another question,
    and an answer is wanted)."""
    import numpy as np

    known = np.flatnonzero(np.isfinite(meant))
    chosen: np.ndarray = known[np.lexsort((known, -meant[known], asks[known]))][:LEAD]
    return chosen


def raised(score: np.ndarray, meant: np.ndarray, asks: np.ndarray, weight: float) -> np.ndarray:
    """`score` with the `lead` raised by `weight` times the best score of the others, in
    the lead's order: with weight 1 they lead."""
    import numpy as np

    first = lead(meant, asks)
    if not len(first) or len(first) == len(score):
        return score
    rest = np.setdiff1d(np.arange(len(score)), first)
    result = score.copy()
    result[first] = weight * (float(score[rest].max()) + (LEAD - np.arange(len(first))) / LEAD)
    return result


def preferred(pool: Pool, search: Search) -> np.ndarray | None:
    """Which candidates were said when the question's date names (None: it names none)."""
    if search.prefer is None or search.prefer == (None, None):
        return None
    start, end = search.prefer
    inside: np.ndarray = pool.time != NO_TIME
    if start is not None:
        inside &= pool.time >= start
    if end is not None:
        inside &= pool.time < end
    return inside


def spread(
    ranked: np.ndarray, score: np.ndarray, block: np.ndarray, factor: float, k: int
) -> np.ndarray:
    """The first `k` of `ranked` chosen one by one, each candidate's score lowered by
    `factor` for every one of its block (session) already chosen. Scores only fall, so a
    candidate is rescored only when it comes to the top with a stale score (lazy greedy:
    O(n log n), not O(n k)); among equal scores the engine's order stands."""
    import heapq

    import numpy as np

    heap = [(-float(score[i]), place, 0, int(i)) for place, i in enumerate(ranked)]
    heapq.heapify(heap)
    chosen: list[int] = []
    taken: dict[int, int] = {}
    while heap and len(chosen) < k:
        _, place, seen, i = heapq.heappop(heap)
        now = taken.get(int(block[i]), 0)
        if seen != now:  # its session gained hits since it was scored
            heapq.heappush(heap, (-float(score[i]) * factor**now, place, now, i))
            continue
        chosen.append(i)
        taken[int(block[i])] = now + 1
    return np.array(chosen, dtype=np.int64)


def column(values: Sequence[float | None], missing: int, dtype: str | None = None) -> np.ndarray:
    """A fast field's values as an array (`missing` where a document has none)."""
    import numpy as np

    kind = "int64" if dtype is None else dtype
    if not values:
        return np.zeros(0, dtype=kind)
    return np.array([missing if v is None else v for v in values], dtype=kind)


def scaled(cosine: np.ndarray) -> np.ndarray:
    """Cosines from 0 (the least) up, over their spread or `MEANING_SPREAD` if that is
    wider: at most 1."""
    spread = max(float(cosine.max() - cosine.min()), MEANING_SPREAD)
    scaled: np.ndarray = (cosine - cosine.min()) / spread
    return scaled


def unit_vector(vector: np.ndarray) -> np.ndarray:
    """The question's vector at length 1, as the rows it is compared with."""
    import numpy as np

    from partner_memory.recall.embed import unit_rows

    result: np.ndarray = unit_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
    return result


def bm25(tf: float, length: float, average: float, documents: int, df: int) -> float:
    """tantivy's BM25, for the window's messages (scored with the index's statistics)."""
    idf = math.log(1 + (documents - df + 0.5) / (df + 0.5))
    return idf * (1 + K1) * tf / (tf + K1 * (1 - B + B * length / (average or 1.0)))
