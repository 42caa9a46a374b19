"""The recall scorer: BM25 over messages, each read together with its neighbours.

What we measured on the LoCoMo dev conversations decides the design: a
message alone is a poor document (52 % of the evidence in the top ten), a
message counted with the two before and the two after it in its memory
session at half weight finds far more, and a session-level score plus a
boost for the participant a question names add the rest (79 % recall@10,
categories 1-4, offline). So each message is a document whose term counts
are its own plus half its neighbours' (neighbours are applied when a query
is scored, so adding a message never rewrites others' postings); its length
is weighted the same way. The unit (memory session) is a second document,
and the two BM25 scores, each divided by its maximum, are added at
`UNIT_WEIGHT`.

The index lives in memory and grows by appending; scoring is exhaustive
over the postings of the query's terms with numpy, so its cost follows the
number of messages the terms occur in. When messages carry vectors
(`recall.embed`), the best `DENSE_CANDIDATES` are rescored: each one's
vector, with its neighbours' at the same half weight, is compared with the
query's, and `DENSE_WEIGHT` times the min-max scaled cosine is added.
"""

from __future__ import annotations

import math
import re
import threading
from array import array
from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


K1, B = 1.5, 0.75
#: Neighbours on each side counted into a message's document, and their weight.
NEIGHBOURS, NEIGHBOUR_WEIGHT = 2, 0.5
#: Weight of the unit-level score next to the message's own.
UNIT_WEIGHT = 0.3
#: Messages of the one participant a query names count this much more.
SPEAKER_BOOST = 2.0
#: Messages said when a query's date names score this much more (a preference, not a
#: filter: on the LoCoMo dev questions, filtering by their dates lost 2 points of R@5, as
#: the date words of each message already find most of them).
DATE_BOOST = 1.5
#: From this many messages on, words held by more than COMMON_SHARE of them only add to
#: what rarer words found (below it every word is scored everywhere).
EXACT_BELOW, COMMON_SHARE = 50_000, 0.05
#: ...and only to the scores of this many of the best by rarer words.
COMMON_POOL = 5_000
#: Words whose counts per unit a search keeps for the next.
UNIT_COUNTS_KEPT = 1024
#: Most neighbours a message may be read with on each side.
MAX_NEIGHBOURS = 4
#: Messages rescored by meaning, and the weight of the (min-max scaled) cosine: rescoring
#: the words' top 100 measured as good as a full dense search.
DENSE_CANDIDATES, DENSE_WEIGHT = 100, 0.3
_NO_TIME = -1


@dataclass(frozen=True, slots=True)
class Doc:
    """One message as the index sees it."""

    #: What a hit gives back (the caller's way to find the message).
    key: Hashable
    #: The memory session (unit) it belongs to: its neighbours and its unit score.
    unit: Hashable
    position: int
    terms: Sequence[str]
    speaker: str | None = None
    timestamp: int | None = None
    #: Its meaning as signed bytes (`recall.embed.pack`), if an embedder made one.
    vector: bytes | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    key: Hashable
    score: float


class RecallIndex:
    """Append-only; safe to share between threads (one lock). The weights default to what
    was measured best; `RecallIndex(neighbours=0, unit_weight=0, speaker_boost=1)` is
    plain BM25 over single messages (the baseline `bench locomo` prints beside it)."""

    def __init__(
        self,
        *,
        neighbours: int = NEIGHBOURS,
        neighbour_weight: float = NEIGHBOUR_WEIGHT,
        unit_weight: float = UNIT_WEIGHT,
        speaker_boost: float = SPEAKER_BOOST,
        dense_weight: float = DENSE_WEIGHT,
        date_boost: float = DATE_BOOST,
    ) -> None:
        if not 0 <= neighbours <= MAX_NEIGHBOURS:
            raise ValueError(f"neighbours must be between 0 and {MAX_NEIGHBOURS}")
        self.neighbours = neighbours
        #: The offsets of a message's neighbours, each with its bit in `_near`.
        self._steps = [*range(-neighbours, 0), *range(1, neighbours + 1)]
        self.neighbour_weight = neighbour_weight
        self.unit_weight = unit_weight
        self.speaker_boost = speaker_boost
        self.dense_weight = dense_weight
        self.date_boost = date_boost
        self._lock = threading.RLock()
        self._keys: list[Hashable] = []
        self._unit_of = array("i")
        self._position = array("q")
        self._speaker_of = array("i")
        self._time = array("q")
        self._length = array("f")
        self._weighted = array("f")
        self._units: dict[Hashable, int] = {}
        self._unit_length = array("f")
        self._speakers: dict[str, int] = {}
        self._postings: dict[str, tuple[array[int], array[float]]] = {}
        #: The last NEIGHBOURS messages added to each unit: (position, doc).
        self._tail: dict[int, list[tuple[int, int]]] = {}
        #: Every message's vector, `dimensions` signed bytes each (zeros: none).
        self._vectors = bytearray()
        self.dimensions = 0
        #: The time of the newest message (None: no message has one).
        self.newest: int | None = None
        #: Per message, a bit per step of `_steps`: the message that far away in the
        #: index is its neighbour (same unit, that many positions away).
        self._near = bytearray()
        #: Sums of the messages' weighted lengths, and of all lengths (the averages).
        self._weighted_total = 0.0
        self._length_total = 0.0
        #: Per-message working arrays of a search, kept zeroed between searches so a
        #: search costs what its terms' postings cost, not the index's size.
        self._counted: np.ndarray | None = None
        self._total: np.ndarray | None = None
        #: Common words' reach, last counted: (postings then, messages reached).
        self._reached: dict[str, tuple[int, int]] = {}
        #: Words' counts per unit, as of how many of their postings (most recent last).
        self._unit_counts: dict[str, tuple[int, np.ndarray]] = {}
        #: Messages that stay: those beyond are a search's window (`including`).
        self._stored = 0

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def speakers(self) -> list[str]:
        with self._lock:
            return list(self._speakers)

    def add(self, docs: Sequence[Doc]) -> None:
        """Append messages; a unit's messages must come in position order."""
        with self._lock:
            for doc in docs:
                self._add(doc)
            self._stored = len(self._keys)

    def _add(self, doc: Doc) -> None:
        i = len(self._keys)
        unit = self._units.setdefault(doc.unit, len(self._units))
        if unit == len(self._unit_length):
            self._unit_length.append(0.0)
        speaker = -1
        if doc.speaker:
            speaker = self._speakers.setdefault(doc.speaker.lower(), len(self._speakers))
        counts = Counter(doc.terms)
        length = float(len(doc.terms))
        weighted = length
        tail = self._tail.setdefault(unit, [])
        for position, j in tail:
            if 0 < doc.position - position <= self.neighbours:
                self._weighted[j] += self.neighbour_weight * length
                self._weighted_total += self.neighbour_weight * length
                weighted += self.neighbour_weight * self._length[j]
        near = 0
        for bit, step in enumerate(self._steps):
            j = i + step
            if (
                step < 0 <= j
                and self._unit_of[j] == unit
                and self._position[j] == doc.position + step
            ):
                near |= 1 << bit
                self._near[j] |= 1 << self._steps.index(-step)
        self._near.append(near)
        tail.append((doc.position, i))
        del tail[: max(0, len(tail) - self.neighbours)]
        self._keys.append(doc.key)
        self._unit_of.append(unit)
        self._position.append(doc.position)
        self._speaker_of.append(speaker)
        self._time.append(_NO_TIME if doc.timestamp is None else doc.timestamp)
        if doc.timestamp is not None and (self.newest is None or doc.timestamp > self.newest):
            self.newest = doc.timestamp
        self._length.append(length)
        self._weighted.append(weighted)
        self._weighted_total += weighted
        self._length_total += length
        self._unit_length[unit] += length
        if doc.vector is not None and not self.dimensions and not self._vectors:
            self.dimensions = len(doc.vector)
        if self.dimensions:
            if len(self._vectors) < i * self.dimensions:  # messages before the first vector
                self._vectors.extend(bytes(i * self.dimensions - len(self._vectors)))
            vector = doc.vector
            usable = vector is not None and len(vector) == self.dimensions
            self._vectors += vector if vector is not None and usable else bytes(self.dimensions)
        for term, count in counts.items():
            docs, tfs = self._postings.setdefault(term, (array("i"), array("f")))
            docs.append(i)
            tfs.append(float(count))

    @contextmanager
    def including(self, docs: Sequence[Doc]) -> Iterator[None]:
        """Search with `docs` added for the duration (the window, not yet rolled).

        Their unit must be one the index does not hold, so taking them out again
        restores every other message exactly."""
        with self._lock:
            if any(d.unit in self._units for d in docs):
                raise ValueError("documents added for a search need a unit of their own")
            size, units, speakers = len(self._keys), len(self._units), len(self._speakers)
            newest, totals = self.newest, (self._weighted_total, self._length_total)
            last = bytes(self._near[max(0, size - self.neighbours) :])
            touched = {t for d in docs for t in d.terms}
            before = {t: len(self._postings[t][0]) for t in touched if t in self._postings}
            for doc in docs:  # not `add`: these do not stay (`_stored` keeps saying so)
                self._add(doc)
            try:
                yield
            finally:
                del self._keys[size:]
                for column in (self._unit_of, self._position, self._speaker_of, self._time):
                    del column[size:]
                del self._length[size:]
                del self._weighted[size:]
                del self._vectors[size * self.dimensions :]
                del self._near[size:]
                self._near[max(0, size - self.neighbours) :] = last
                self.newest = newest
                self._weighted_total, self._length_total = totals
                if not self._vectors:
                    self.dimensions = 0
                for term in touched:
                    if term in before:
                        docs_, tfs = self._postings[term]
                        del docs_[before[term] :]
                        del tfs[before[term] :]
                    else:
                        self._postings.pop(term, None)
                for key in list(self._units)[units:]:
                    del self._tail[self._units.pop(key)]
                del self._unit_length[units:]
                for name in list(self._speakers)[speakers:]:
                    del self._speakers[name]

    def named_speaker(self, query: str) -> str | None:
        """The one participant `query` names as a word, or None (none, or several)."""
        words = set(re.findall(r"[^\W_]+", query.lower()))
        named = [s for s in self.speakers if s in words]
        return named[0] if len(named) == 1 else None

    def search(
        self,
        query: Sequence[str],
        *,
        k: int = 10,
        speaker: str | None = None,
        since: int | None = None,
        until: int | None = None,
        vector: np.ndarray | None = None,
        fill: bool = False,
        prefer: tuple[int | None, int | None] | None = None,
        within: Sequence[tuple[Hashable, int, int]] | None = None,
    ) -> list[Hit]:
        """The `k` best messages for the query terms, best first; only messages that
        share a term with the query (or sit beside one) are returned. `vector` (the
        query's meaning, from the embedder that made the messages') rescores the best.
        With `fill`, fewer than `k` found by words are followed by the other messages
        of [since, until) in time order ("what happened yesterday"). Messages said in
        the `prefer` range score `date_boost` times more. `within` keeps to messages of
        these (unit, start, end) ranges (a topic's slices)."""
        import numpy as np  # on first search: commands that never search start without it

        with self._lock:
            if not self._keys or k <= 0:
                return []
            # a bounded search keeps every match: the few inside the bounds may be
            # among those that pruning would have dropped
            narrowed = since is not None or until is not None or within is not None
            hit, final = self._by_words(set(query), prune=not narrowed)
            if speaker is not None and speaker.lower() in self._speakers:
                speakers = np.frombuffer(self._speaker_of, dtype=np.int32)[hit]
                final[speakers == self._speakers[speaker.lower()]] *= self.speaker_boost
            if prefer is not None and prefer != (None, None):
                final[self._in_range(hit, *prefer)] *= self.date_boost
            bounded = since is not None or until is not None
            if bounded:
                final[~self._in_range(hit, since, until)] = 0.0
            if within is not None:
                final[~self._within(hit, within)] = 0.0
            scored = final > 0
            hit, final = hit[scored], final[scored]
            hits: list[Hit] = []
            if len(hit):
                dense = vector is not None and self._dense_ready(vector)
                pool = min(len(hit), max(k, DENSE_CANDIDATES) if dense else k)
                chosen = np.argpartition(-final, pool - 1)[:pool]
                best, best_score = hit[chosen], final[chosen]
                if vector is not None and dense:
                    cosine = self._cosines(best, vector)
                    spread = float(cosine.max() - cosine.min())
                    if spread > 0:
                        best_score += self.dense_weight * (cosine - cosine.min()) / spread
                order = np.lexsort((best, -best_score))[:k]
                hits = [Hit(self._keys[int(best[i])], float(best_score[i])) for i in order]
            if fill and bounded and len(hits) < k:
                every = np.arange(len(self._keys))
                among = self._in_range(every, since, until)
                among[hit] = False
                hits += self._by_time(among, k - len(hits))
            return hits

    def _within(self, hit: np.ndarray, within: Sequence[tuple[Hashable, int, int]]) -> np.ndarray:
        """Which of `hit` lie in one of the (unit, start, end) ranges."""
        import numpy as np

        unit_of = np.frombuffer(self._unit_of, dtype=np.int32)[hit]
        position = np.frombuffer(self._position, dtype=np.int64)[hit]
        keep = np.zeros(len(hit), dtype=bool)
        for unit, start, end in within:
            number = self._units.get(unit)
            if number is not None:
                keep |= (unit_of == number) & (position >= start) & (position < end)
        return keep

    def _in_range(self, hit: np.ndarray, since: int | None, until: int | None) -> np.ndarray:
        """Which of `hit` were said in [since, until)."""
        import numpy as np

        times = np.frombuffer(self._time, dtype=np.int64)[hit]
        inside: np.ndarray = times != _NO_TIME
        if since is not None:
            inside &= times >= since
        if until is not None:
            inside &= times < until
        return inside

    def _by_time(self, among: np.ndarray, count: int) -> list[Hit]:
        """The first `count` of `among` in time order, scored 0: what the date alone finds."""
        import numpy as np

        chosen = np.flatnonzero(among)
        times = np.frombuffer(self._time, dtype=np.int64)[chosen]
        chosen = chosen[np.lexsort((chosen, times))][:count]
        return [Hit(self._keys[int(i)], 0.0) for i in chosen]

    def _scratch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The two zeroed per-message arrays of a search (a word's counts, the running
        total), grown to hold `n` messages; a search zeroes what it touched."""
        import numpy as np

        if self._counted is None or self._total is None or len(self._counted) < n:
            size = max(n, int(n * 1.25) + 1024)
            self._counted = np.zeros(size, dtype=np.float32)
            self._total = np.zeros(size, dtype=np.float32)
        return self._counted, self._total

    def _by_words(self, query: set[str], *, prune: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """The messages that hold a query word or sit beside one, and their scores.

        Work follows the postings of the query's words: each word's counts (its own,
        plus half its neighbours') are summed in a zeroed scratch array, read back
        where touched and zeroed again; a word's document frequency is the number
        of messages it reaches. In a large index (and with `prune`), words held by
        more than `COMMON_SHARE` of the messages (a participant's name, "like") only
        add to the scores of the `COMMON_POOL` best messages the rarer words found -
        as long as there are rarer words - so a common word costs two passes over
        its postings, not ten."""
        import numpy as np

        n = len(self._keys)
        unit_length = np.frombuffer(self._unit_length, dtype=np.float32)
        counted, total = self._scratch(n)
        present = sorted(
            (
                (np.frombuffer(d, dtype=np.int32), np.frombuffer(t, dtype=np.float32), term)
                for term, (d, t) in ((w, self._postings[w]) for w in query if w in self._postings)
            ),
            key=lambda found: len(found[0]),
        )
        limit = COMMON_SHARE * n if prune and n >= EXACT_BELOW else n
        rare = [found for found in present if len(found[0]) <= limit] or present
        common = present[len(rare) :]
        scale = _Scale(
            np.frombuffer(self._weighted, dtype=np.float32),
            self._weighted_total / n or 1.0,
            n,
        )
        unit_score = np.zeros(len(unit_length), dtype=np.float32)
        for docs, tf, term in rare:
            every, distinct = self._reach(docs, tf, counted)
            values = counted[every]  # a message reached twice reads the same sum twice...
            counted[every] = 0.0
            total[every] = total[every] + scale.bm25(values, every, distinct)  # ...writes once
            self._add_unit_score(unit_score, term, docs, tf)
        hit = np.flatnonzero(total[:n])
        if common and len(hit) > COMMON_POOL:
            kept = np.zeros(len(hit), dtype=bool)
            kept[np.argpartition(-total[hit], COMMON_POOL - 1)[:COMMON_POOL]] = True
            total[hit[~kept]] = 0.0  # the scratch array stays zeroed
            hit = hit[kept]
        for docs, tf, term in common:
            values = self._counts_at(hit, docs, tf, counted)
            gained = values > 0
            total[hit[gained]] += scale.bm25(
                values[gained], hit[gained], self._reach_count(term, docs, tf, counted)
            )
            self._add_unit_score(unit_score, term, docs, tf)
        score = total[hit]
        total[hit] = 0.0
        if not len(hit):
            return hit, score
        final: np.ndarray = score / score.max()
        if unit_score.any() and self.unit_weight:
            unit_of = np.frombuffer(self._unit_of, dtype=np.int32)
            final += self.unit_weight * (unit_score / unit_score.max())[unit_of[hit]]
        return hit, final

    def _reach(
        self, docs: np.ndarray, tf: np.ndarray, counted: np.ndarray
    ) -> tuple[np.ndarray, int]:
        """Sum a word's counts into `counted` (own, plus its neighbours' at half weight);
        return the messages reached (some twice) and how many there are."""
        import numpy as np

        near = np.frombuffer(self._near, dtype=np.uint8)
        counted[docs] = tf
        reached, distinct = [docs], len(docs)
        bits = near[docs]
        for bit, step in enumerate(self._steps):
            next_to = (bits & (1 << bit)) != 0
            beside = docs[next_to] + step  # distinct within one step
            distinct += int(np.count_nonzero(counted[beside] == 0))  # reached first now
            counted[beside] += self.neighbour_weight * tf[next_to]
            reached.append(beside)
        return np.concatenate(reached), distinct

    def _counts_at(
        self, hit: np.ndarray, docs: np.ndarray, tf: np.ndarray, counted: np.ndarray
    ) -> np.ndarray:
        """A word's counts (own, plus neighbours' at half weight) at the messages `hit`."""
        import numpy as np

        near = np.frombuffer(self._near, dtype=np.uint8)
        counted[docs] = tf
        values = counted[hit]
        bits = near[hit]
        for bit, step in enumerate(self._steps):
            next_to = (bits & (1 << bit)) != 0
            values[next_to] += self.neighbour_weight * counted[hit[next_to] + step]
        counted[docs] = 0.0
        result: np.ndarray = values
        return result

    def _reach_count(self, term: str, docs: np.ndarray, tf: np.ndarray, counted: np.ndarray) -> int:
        """How many messages a common word reaches: counted when its postings have grown
        by a tenth since last time, else scaled from that count."""
        known = self._reached.get(term)
        if known is not None and known[0] <= len(docs) <= known[0] * 1.1:
            return round(known[1] * len(docs) / known[0])
        every, distinct = self._reach(docs, tf, counted)
        counted[every] = 0.0
        self._reached[term] = (len(docs), distinct)
        return distinct

    def _add_unit_score(
        self, unit_score: np.ndarray, term: str, docs: np.ndarray, tf: np.ndarray
    ) -> None:
        """Add the word's BM25 over units (memory sessions). Its count per unit is kept
        between searches and brought up to date with the postings added since."""
        import numpy as np

        unit_of = np.frombuffer(self._unit_of, dtype=np.int32)
        unit_length = np.frombuffer(self._unit_length, dtype=np.float32)
        units = len(unit_length)
        stored = int(np.searchsorted(docs, self._stored))
        counted, known = self._unit_counts.pop(term, (0, np.zeros(0, dtype=np.float64)))
        if counted > stored:  # postings it counted are gone (never: the index only grows)
            counted, known = 0, np.zeros(0, dtype=np.float64)
        if counted < stored:  # only messages that stay (not a search's window) are kept
            more = np.bincount(unit_of[docs[counted:stored]], weights=tf[counted:stored])
            grown = np.zeros(max(len(known), len(more)), dtype=np.float64)
            grown[: len(known)] += known
            grown[: len(more)] += more
            counted, known = stored, grown
        self._unit_counts[term] = (counted, known)
        while len(self._unit_counts) > UNIT_COUNTS_KEPT:
            del self._unit_counts[next(iter(self._unit_counts))]
        in_unit = np.zeros(units, dtype=np.float64)
        in_unit[: len(known)] = known[:units]
        if stored < len(docs):
            in_unit += np.bincount(unit_of[docs[stored:]], weights=tf[stored:], minlength=units)
        found = np.flatnonzero(in_unit)
        unit_score[found] += _bm25(
            in_unit[found].astype(np.float32),
            unit_length[found],
            self._length_total / len(unit_length) or 1.0,
            len(unit_length),
            len(found),
        )

    def _dense_ready(self, vector: np.ndarray) -> bool:
        return bool(self.dense_weight and len(vector) == self.dimensions)

    def _cosines(self, best: np.ndarray, vector: np.ndarray) -> np.ndarray:
        """Cosine of the query with each of `best`, read with its neighbours at half weight."""
        import numpy as np

        from partner_memory.recall.embed import unit_rows

        near = np.frombuffer(self._near, dtype=np.uint8)
        matrix = np.frombuffer(self._vectors, dtype=np.int8).reshape(len(self), self.dimensions)
        total = unit_rows(matrix[best].astype(np.float32))
        bits = near[best]
        for bit, step in enumerate(self._steps):
            next_to = (bits & (1 << bit)) != 0
            beside = unit_rows(matrix[best[next_to] + step].astype(np.float32))
            total[next_to] += self.neighbour_weight * beside
        query = unit_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
        result: np.ndarray = unit_rows(total) @ query
        return result


@dataclass(frozen=True, slots=True)
class _Scale:
    """What BM25 needs of the whole index for one search."""

    weighted: np.ndarray
    average: float
    documents: int

    def bm25(self, tf: np.ndarray, where: np.ndarray, df: int) -> np.ndarray:
        return _bm25(tf, self.weighted[where], self.average, self.documents, df)


def _bm25(
    tf: np.ndarray, length: np.ndarray, average: float, documents: int, df: int
) -> np.ndarray:
    idf = math.log(1 + (documents - df + 0.5) / (df + 0.5))
    return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
