"""One namespace's recall index on tantivy: BM25 over each message read with its neighbours.

This module searches; the others of the index each have one job:
`index_layout` (the documents, the state, the parts on disk), `index_writes`
(the write path), `vector_rows` (the vectors beside it), `ranking` (pure
numpy over the candidates, and the weights), `window_scoring` (the window's
messages as candidates) and `time_listing` (what a date alone finds).

A search gathers candidates: the best `POOL` messages by words (tantivy's
BM25, filtered by the search's bounds as clauses of the query), the window's
(`window_scoring`), and - with a question vector - the stored messages nearest
it by their own vector (exactly, or by `recall.vector_graph` beyond it) that
mean it more than any its words found (a paraphrase shares no word). The
blocks' scores are asked for beside them; `ranking.rank` orders the lot.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tantivy

from partner_memory.recall import vector_graph
from partner_memory.recall.index_layout import (
    BLOCK_SCHEMA,
    INDEX_FORMAT,
    SCHEMA,
    WINDOW_BLOCK,
    IndexPart,
    IndexState,
    any_of,
    hash_number,
    nothing,
    place_of,
    positions,
    time_range,
)
from partner_memory.recall.index_writes import IndexParts, write
from partner_memory.recall.ranking import (
    DENSE_CANDIDATES,
    MEANING_CANDIDATES,
    POOL,
    Pool,
    Scoring,
    lead,
    rank,
    unit_vector,
)
from partner_memory.recall.searcher import Doc, Hit, Search
from partner_memory.recall.time_listing import by_time
from partner_memory.recall.vector_graph import VectorGraph
from partner_memory.recall.vector_rows import VectorRows
from partner_memory.recall.window_scoring import (
    window_block_score,
    window_by_meaning,
    window_candidates,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np

__all__ = ["INDEX_FORMAT", "IndexState", "Scoring", "TantivyIndex"]

#: The index's parts under the names a test's crash hook patches.
_Part = IndexPart


class TantivyIndex:
    """One namespace's index in `directory` (None: in memory): the messages' index, and
    the blocks' beside it. Writes are the caller's to serialise (`IndexReplicas` does,
    across threads and processes)."""

    def __init__(self, directory: Path | None = None, scoring: Scoring | None = None) -> None:
        self.scoring = scoring or Scoring()
        self.directory = directory
        self._messages = IndexPart(SCHEMA, None if directory is None else directory / "messages")
        self._blocks = IndexPart(BLOCK_SCHEMA, None if directory is None else directory / "blocks")
        self._vectors = VectorRows(None if directory is None else directory / "messages")
        self._graph = VectorGraph(None if directory is None else directory / "messages")
        self._state = IndexState(**self._messages.state())
        self._parts = IndexParts(
            self._messages, self._blocks, self._vectors, self._graph, self.scoring.neighbours
        )

    # -- reading -----------------------------------------------------------------------

    def refresh(self) -> IndexState:
        """Read the index's last commit (another process may have made it)."""
        self._messages.index.reload()
        state = IndexState(**self._messages.state())
        if state != self._state:  # the blocks commit first: unchanged messages, same blocks
            self._blocks.index.reload()
        self._state = state
        return state

    @property
    def state(self) -> IndexState:
        return self._state

    @property
    def newest(self) -> int | None:
        return self._state.newest

    @property
    def speakers(self) -> list[str]:
        return list(self._state.speakers)

    def __len__(self) -> int:
        return self._state.messages

    # -- writing -----------------------------------------------------------------------

    def add(
        self,
        docs: Sequence[Doc],
        *,
        loaded: int | None = None,
        generation: int | None = None,
        embedder: str | None = None,
        clear: bool = False,
    ) -> None:
        """Add stored messages (a unit's in position order) and commit, with the state
        moved to `loaded` / `generation` / `embedder` where given. `clear` empties the
        index first (a rebuild). See `recall.index_writes`."""
        self._state = write(
            self._parts,
            self._state,
            docs,
            loaded=loaded,
            generation=generation,
            embedder=embedder,
            clear=clear,
        )

    # -- searching ---------------------------------------------------------------------

    def search(self, search: Search) -> list[Hit]:
        """The `search.k` best messages, best first."""
        import numpy as np

        if search.k <= 0:
            return []
        searcher = self._messages.index.searcher()
        words = sorted(set(search.terms))
        dense = search.vector is not None and self.scoring.dense_weight > 0
        hits: list[Hit] = []
        pool = Pool.empty()
        near = None
        if words:
            # tantivy searches without the GIL: the words' search runs on another core
            # while this thread finds the rows nearest the question's meaning
            asked = _beside().submit(self._candidates, searcher, words, search)
            near = self._near(searcher, search) if dense else None
            pool = asked.result() + window_candidates(
                search, words, self._state, searcher, self.scoring
            )
        elif dense:
            near = self._near(searcher, search)
        blocks = None
        if words and self.scoring.unit_weight:  # the sessions' scores, while meaning adds
            ask = pool.block if near is None else np.union1d(pool.block, near.docs.block)
            blocks = _Blocks(_beside().submit(self._block_scores, words, ask), ask)
        if dense:
            weak = bool(search.fusion) and self._words_hold(searcher, pool, words, search) < HELD
            pool, leads = self._with_meaning(searcher, search, pool, near, weak)
            if not leads:  # the words found what was asked, or meaning found no better
                search = replace(search, fusion=0.0)
        if len(pool):
            hits = self._rank(searcher, pool, words, search, blocks)
        if search.fill and (search.bounded or search.within is not None) and len(hits) < search.k:
            hits += by_time(searcher, search, {h.place for h in hits}, self._filters(search))
        return hits

    def _words_hold(
        self, searcher: tantivy.Searcher, pool: Pool, words: list[str], search: Search
    ) -> float:
        """How much of the question one of the best candidates by words holds in its own
        text: the largest share of the question's terms' idf (0 to 1). Its words then
        say what was asked; `Search.fusion` is for when they do not: a paraphrase, or a
        word shared by chance, or only by a neighbour. The words that named a preferred
        date (`Search.dated`) are not counted: the date answers them."""
        import math

        import numpy as np

        asked = set(words) - search.dated
        if not len(pool):
            return 0.0
        if not asked:  # only the date's words: the date answers them
            return 1.0
        documents = max(searcher.num_docs, 1)
        idf = {w: math.log(1 + documents / (1 + searcher.doc_freq("text", w))) for w in asked}
        total = sum(idf.values()) or 1.0
        window = {d.position: d.terms for d in search.window}
        best = 0.0
        for i in np.argsort(-pool.score, kind="stable")[:WORDS_CHECKED]:
            place = pool.place[i]
            if place is not None:
                held = set(window.get(place[1], ()))
            else:
                own = searcher.doc(pool.address[i]).get_first("own")
                held = set(bytes(own or b"").decode().split())
            best = max(best, sum(idf[w] for w in held & asked) / total)
        return best

    def _filters(self, search: Search) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        must = tantivy.Occur.Must
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []  # only messages have text
        if search.bounded:
            clauses.append((must, time_range(search.since, search.until)))
        if search.within is not None:
            ranges = [
                (tantivy.Occur.Should, positions(unit, start, end))
                for unit, start, end in search.within
                if end > start
            ]
            clauses.append((must, tantivy.Query.boolean_query(ranges) if ranges else nothing()))
        where = search.where
        if where is not None:
            if where.role is not None:
                clauses.append((must, tantivy.Query.term_query(SCHEMA, "role", where.role)))
            if where.speaker_name is not None:
                speaker = hash_number(where.speaker_name)
                clauses.append((must, tantivy.Query.term_query(SCHEMA, "speaker", speaker)))
            if where.unit is not None:
                clauses.append((must, tantivy.Query.term_query(SCHEMA, "unit", where.unit)))
            clauses += [(must, tantivy.Query.term_query(SCHEMA, "tags", t)) for t in where.tags]
        return clauses

    def _filtered(self, search: Search, query: tantivy.Query) -> tantivy.Query:
        """`query` among the messages the search's bounds admit (the bounds score 0)."""
        filters = [(o, tantivy.Query.const_score_query(q, 0.0)) for o, q in self._filters(search)]
        if not filters:  # bare, so tantivy can skip what cannot reach the best (block-max WAND)
            return query
        return tantivy.Query.boolean_query([*filters, (tantivy.Occur.Must, query)])

    def _candidates(self, searcher: tantivy.Searcher, words: list[str], search: Search) -> Pool:
        found = []
        if self._state.messages:
            query = self._filtered(search, any_of(SCHEMA, words))
            found = searcher.search(query, max(POOL, search.k), count=False).hits
        return _stored_pool(searcher, [a for _, a in found], [score for score, _ in found])

    def _near(self, searcher: tantivy.Searcher, search: Search) -> _Near | None:
        """The stored rows nearest the question's meaning, their cosines and the messages
        still in the index of them, nearest first (None when the index's vectors cannot
        be compared with the question's)."""
        state, vector = self._state, search.vector
        assert vector is not None
        if state.dimensions != len(vector) or not self._graph.exact(state.rows, state.graph_rows):
            return None
        rows, cosine = self._nearest(state, vector, 2 * MEANING_CANDIDATES)
        wanted = [int(r) for r in rows]
        found = []
        if wanted:  # a rewritten message's rows are no longer any message's
            rows_of = tantivy.Query.term_set_query(SCHEMA, "vecno", wanted)
            query = self._filtered(search, rows_of)
            found = searcher.search(query, len(wanted), count=False).hits
        docs = _stored_pool(searcher, [a for _, a in found], [0.0] * len(found))
        rank = {r: i for i, r in enumerate(wanted)}
        order = sorted(range(len(docs)), key=lambda i: rank[int(docs.vecno[i])])
        return _Near(rows, cosine, docs.take(order))

    def _with_meaning(
        self,
        searcher: tantivy.Searcher,
        search: Search,
        pool: Pool,
        near: _Near | None,
        weak: bool,
    ) -> tuple[Pool, bool]:
        """`pool` and the messages nearest the question's meaning (`near`, and the
        window's) that its words did not find and that mean it more than any the words
        found (so a question whose words find what it asks for is not padded with what
        merely resembles it), scored 0 by words: only meaning ranks them; and whether
        meaning leads (`Search.fusion`).

        It leads when the words are `weak` (they hold little of the question): the
        nearest by meaning (`ranking.lead`: read alone, statements first) that are each
        nearer than all of the words' best (`WORDS_CHECKED`) but itself - a neighbour's
        word may have found it - carry their cosine (`Pool.meant`) and join the pool;
        `ranking.raised` puts them first. With `Search.lead_all` (an embedder that reads
        sentences), once one is nearer the whole lead comes first: a message the words
        found that is also near in meaning no longer keeps meaning's next ones back."""
        import numpy as np

        vector = search.vector
        assert vector is not None
        found, words = self._words_cosines(pool, search, vector)
        floor = max(0.0, float(words.max())) if len(words) else 0.0
        stored = Pool.empty()
        cosine: dict[int, float] = {}
        if near is not None:
            cosine = {int(r): float(c) for r, c in zip(near.rows, near.cosine, strict=True)}
            have = {int(v) for v in pool.vecno if v >= 0}
            chosen = [i for i, v in enumerate(near.docs.vecno) if int(v) not in have]
            stored = near.docs.take(chosen[:MEANING_CANDIDATES])
            stored = stored.meaning({i: cosine[int(v)] for i, v in enumerate(stored.vecno)})
        window, in_window = window_by_meaning(search, {p for p in pool.place if p}, vector)
        added = stored + window
        keep = added.meant > floor
        leads = False
        if weak:
            meant = pool.meaning(
                {
                    i: cosine[int(v)] if place is None else in_window[place[1]]
                    for i, (v, place) in enumerate(zip(pool.vecno, pool.place, strict=True))
                    if (place is None and int(v) in cosine)
                    or (place is not None and place[1] in in_window)
                }
            ).meant
            both = np.concatenate([meant, added.meant])
            checked, near_words = found[:WORDS_CHECKED], words[:WORDS_CHECKED]
            # each nearer than any of the words' best but itself (a neighbour's word may
            # have found it)
            first = lead(both, np.concatenate([pool.asks, added.asks]))
            chosen = [
                int(i)
                for i in first
                if both[i] > max(0.0, float(near_words[checked != i].max(initial=0.0)))
            ]
            if chosen and search.lead_all:
                chosen = [int(i) for i in first]
            if chosen:
                leads = True
                raised = np.full(len(both), -np.inf)
                raised[chosen] = both[chosen]
                pool = replace(pool, meant=raised[: len(pool)])
                added = replace(added, meant=raised[len(pool) :])
                keep[[i - len(pool) for i in chosen if i >= len(pool)]] = True
        return pool + added.take(np.flatnonzero(keep).tolist()), leads

    def _nearest(
        self, state: IndexState, vector: np.ndarray, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The rows nearest the question: by the graph, and exactly among those after it."""
        import numpy as np

        from partner_memory.recall.embed import pack

        rows, cosine = self._vectors.nearest(state, vector, count, start=state.graph_rows)
        if state.graph is None or not state.graph_rows:
            return rows, cosine
        query = pack(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
        if state.graph_rows <= vector_graph.SCANNED_ROWS:  # every row, exactly
            keys, near = vector_graph.scan(
                self._vectors.own(state, 0)[: state.graph_rows], query, count
            )
        else:
            keys, near = self._graph.nearest(state.graph, query, count)
        rows, cosine = np.concatenate([keys, rows]), np.concatenate([near, cosine])
        order = np.argsort(-cosine, kind="stable")[:count]
        return rows[order], cosine[order]

    def _words_cosines(
        self, pool: Pool, search: Search, vector: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The words' best (`DENSE_CANDIDATES` of `pool`, best first) and their cosines
        with the question, each read alone: what a message found by meaning alone must
        beat."""
        import numpy as np

        from partner_memory.recall.embed import unit_rows

        best = np.argsort(-pool.score, kind="stable")[:DENSE_CANDIDATES]
        width = len(vector)
        rows = np.zeros((len(best), width), dtype=np.float32)
        if self._state.dimensions == width and len(best):
            stored = self._vectors.read(self._state, pool.vecno[best], np.ones(len(best), bool))
            if stored is not None:
                rows[:] = stored
        window = {d.position: d.vector for d in search.window}
        for i, candidate in enumerate(best):
            place = pool.place[candidate]
            own = window.get(place[1]) if place is not None else None
            if own is not None and len(own) == width:
                rows[i] = np.frombuffer(own, dtype=np.int8)
        cosine: np.ndarray = unit_rows(rows) @ unit_vector(vector)
        return best, cosine

    def _block_scores(self, words: list[str], blocks: np.ndarray) -> dict[int, float]:
        """The scores of these blocks for the words (those that hold one)."""
        searcher = self._blocks.index.searcher()
        wanted = sorted({int(b) for b in blocks if b != WINDOW_BLOCK})
        if not wanted:
            return {}
        query = tantivy.Query.boolean_query(
            [
                (
                    tantivy.Occur.Must,
                    tantivy.Query.const_score_query(
                        tantivy.Query.term_set_query(BLOCK_SCHEMA, "blockid", wanted), 0.0
                    ),
                ),
                (tantivy.Occur.Must, any_of(BLOCK_SCHEMA, words)),
            ]
        )
        found = searcher.search(query, len(wanted), count=False).hits
        ids = searcher.fast_field_values("blockid", [a for _, a in found]) if found else []
        return {int(b or 0): score for (score, _), b in zip(found, ids, strict=True)}

    def _rank(
        self,
        searcher: tantivy.Searcher,
        pool: Pool,
        words: list[str],
        search: Search,
        early: _Blocks | None,
    ) -> list[Hit]:
        """The pool ranked (`ranking.rank`) with the blocks' scores and the vectors read
        from this index."""
        import numpy as np

        blocks: dict[int, float] = {}
        if early is not None:
            # a block's score does not depend on which others are asked for: those asked
            # for beside the pool's (near by meaning, not chosen) are left out
            present = {int(b) for b in pool.block}
            blocks = {b: v for b, v in early.scores.result().items() if b in present}
            missing = np.setdiff1d(pool.block, early.asked)
            if len(missing):
                blocks.update(self._block_scores(words, missing))
            window = window_block_score(search, words, self._state, self._blocks.index.searcher())
            if window:
                blocks[WINDOW_BLOCK] = window
        width = 0 if search.vector is None else len(search.vector)
        ranked = rank(
            pool,
            search,
            self.scoring,
            blocks=blocks,
            vectors=lambda best: self._vectors_of(pool, best, width),
        )
        return [self._hit(searcher, pool, i, score) for i, score in ranked]

    def _vectors_of(self, pool: Pool, best: np.ndarray, width: int) -> np.ndarray | None:
        """The unit vectors of `best`: each read with its neighbours, or alone for those
        found by meaning alone (as they were found); None when none has one."""
        import numpy as np

        from partner_memory.recall.embed import unit_rows

        matrix = np.zeros((len(best), width), dtype=np.float32)
        if self._state.dimensions == width:
            stored = self._vectors.read(self._state, pool.vecno[best], pool.score[best] == 0)
            if stored is not None:
                matrix[:] = stored
        found = bool(matrix.any())
        for i, candidate in enumerate(best):  # the window's, made for this search
            near = pool.near[candidate]
            if near is not None and len(near) == width:
                matrix[i] = np.frombuffer(near, dtype=np.int8)
                found = True
        if not found:
            return None
        rows: np.ndarray = unit_rows(matrix)
        return rows

    @staticmethod
    def _hit(searcher: tantivy.Searcher, pool: Pool, i: int, score: float) -> Hit:
        place = pool.place[i]
        return Hit(place if place is not None else place_of(searcher.doc(pool.address[i])), score)


@dataclass(frozen=True, slots=True)
class _Blocks:
    """The scores of the blocks `asked` for, being searched."""

    scores: Future[dict[int, float]]
    asked: np.ndarray


@dataclass(frozen=True, slots=True)
class _Near:
    """The stored rows nearest a question, their cosines, and the messages of them."""

    rows: np.ndarray
    cosine: np.ndarray
    docs: Pool


#: The best candidates by words looked at for what they hold of the question.
WORDS_CHECKED = 10
#: The share of the question's idf one of them must hold in its own text for the words
#: to lead. Chosen as the largest share whose LoCoMo dev folds all stay within noise
#: (paired 95 % intervals including 0; 0.6 leaves one fold at -2.0 [-4.0, 0.0]) when
#: meaning led on every weak question; with the nearer-than-the-words check beside it,
#: meaning leads on 158 of 760 LoCoMo questions (R@10 81.1 -> 80.8, each conversation
#: within 0.7), on 63 of the 72 realistic paraphrases (19 % -> 46 % in the top five).
HELD = 0.5

#: By process: a forked child makes its own (the parent's threads do not exist in it).
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _beside() -> ThreadPoolExecutor:
    """Threads for the engine's searches that run beside a search's Python work."""
    with _POOLS_LOCK:
        pool = _POOLS.get(os.getpid())
        if pool is None:
            _POOLS.clear()
            pool = _POOLS[os.getpid()] = ThreadPoolExecutor(
                thread_name_prefix="partner-memory-search"
            )
        return pool


def _stored_pool(searcher: tantivy.Searcher, addresses: list[Any], score: list[float]) -> Pool:
    """Stored candidates, with what ranking reads of them (their fast fields)."""

    def column(name: str) -> list[float | None]:
        return searcher.fast_field_values(name, addresses) if addresses else []

    return Pool.of(
        score=score,
        block=column("blockid"),
        time=column("time"),
        speaker=column("speaker"),
        vecno=column("vecno"),
        address=addresses,
        place=[None] * len(addresses),
        near=[None] * len(addresses),
        asks=column("asks"),
    )
