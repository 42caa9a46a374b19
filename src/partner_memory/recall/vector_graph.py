"""Meaning at any size: an HNSW graph (usearch) over the vector rows, and the rows
added since compared exactly.

Up to `EXACT_ROWS` rows a question is compared with every row (exact, and
cheap: under a millisecond at 20,000 rows of 128 signed bytes; 4 ms and a 51 MB
normalised copy at 100,000). Beyond, the rows are indexed in a usearch graph
of signed bytes, saved as a file of its own and memory-mapped by readers (a
search reads the nodes it visits); rows appended after it (`GRAPH_TAIL` at
most) are compared exactly, so every message is reachable by meaning the
moment it is indexed. The graph is extended by the
index's writer, saved under a new name before the commit that names it, so a
reader never sees a graph cut short, and a crash leaves the old one named.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: Rows compared exactly before a graph is made.
EXACT_ROWS = 20_000
#: Rows appended after the graph that are compared exactly before it is extended.
GRAPH_TAIL = 50_000
#: The graph's shape: links per node, and the breadth of insertion and search. 1024
#: wide, not 128: the one message meaning a question among 100,000 ordinary ones (a
#: sentence encoder's vectors lie in a narrow cone) was missed 128 wide, and now and
#: then 512 wide (`tests/test_encoder`); ~2 ms a search at 100,000. Tight clusters of
#: near-repeats (cosine ~0.99 to each other) can still hide a node from the search.
CONNECTIVITY, EXPANSION_ADD, EXPANSION_SEARCH = 16, 64, 1024
#: Rows compared exactly, as signed bytes (usearch's SIMD scan, no float copy), before
#: the graph is searched instead: a question's one answer far from ordinary talk (an
#: outlier, which HNSW links poorly) was missed by the graph now and then at 100,000
#: rows in 400 clusters even 1024 wide; the scan always finds it (recall p50 ~36 ms at
#: 100,000 with it, against ~18 ms with the graph: the price of not missing it).
SCANNED_ROWS = 150_000
#: Rows added in one batch from which the graph is built in two threads.
PARALLEL_ROWS = 10_000
#: The graph when the index is in memory (it is never saved).
IN_MEMORY = "memory"


class VectorGraph:
    """The graph of one index's rows `[0, graph_rows)`, as its state names it."""

    def __init__(self, directory: Path | None) -> None:
        self._directory = directory
        self._held: tuple[str, Any] | None = None  # (file name, usearch Index)

    @staticmethod
    def exact(rows: int, graph_rows: int) -> bool:
        """Whether the rows after the graph are few enough to compare exactly (an index
        whose graph is still to be made is searched by words alone)."""
        return rows - graph_rows <= max(EXACT_ROWS, GRAPH_TAIL)

    def wanted(self, rows: int, graph_rows: int) -> bool:
        """Whether the rows outgrew exact comparison and the graph's tail is full."""
        return rows > EXACT_ROWS and rows - graph_rows > GRAPH_TAIL

    def extend(self, name: str | None, graph_rows: int, own: np.ndarray) -> str:
        """The graph of `name` (None: none yet) with `own` (its rows from `graph_rows`
        on) added, saved under a new name (returned)."""
        import numpy as np

        graph = self._open(name, writable=True) if name is not None else self._new(own.shape[1])
        keys = np.arange(graph_rows, graph_rows + len(own), dtype=np.uint64)
        # two threads build 2.5x faster, as well (a row's own vector is its nearest in
        # 99.6 % of 2,000 probes at 100,000 random rows either way), but misplace a few
        # rows of a small graph: small batches go in one thread
        threads = 2 if len(own) >= PARALLEL_ROWS else 1
        graph.add(keys, np.ascontiguousarray(own, dtype=np.int8), threads=threads)
        if self._directory is None:
            self._held = (IN_MEMORY, graph)
            return IN_MEMORY
        made = f"graph-{uuid.uuid4().hex}.usearch"
        graph.save(str(self._directory / made))
        with open(self._directory / made, "rb+") as saved:  # durable before the commit
            import os

            os.fsync(saved.fileno())
        self._held = None  # readers map the saved file
        return made

    def nearest(self, name: str, query: bytes, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The `count` graph rows nearest the question (signed bytes), best first, and
        their cosines."""
        import numpy as np

        found = self._open(name, writable=False).search(np.frombuffer(query, dtype=np.int8), count)
        keys = np.asarray(found.keys, dtype=np.int64)
        cosine = 1.0 - np.asarray(found.distances, dtype=np.float32)
        return keys, cosine

    def drop_old(self, keep: str | None) -> None:
        """Delete the graphs no commit names any more but the one before `keep` (a reader
        that read the previous commit may not have opened its graph yet; one mapping a
        deleted graph keeps it)."""
        if self._directory is None:
            return
        old = [p for p in self._directory.glob("graph-*.usearch") if p.name != keep]
        old.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for path in old[1 if keep is not None else 0 :]:
            path.unlink(missing_ok=True)

    def _open(self, name: str, *, writable: bool) -> Any:
        from usearch.index import Index

        held = self._held
        if held is not None and held[0] == name:
            return held[1]
        if self._directory is None:
            raise LookupError(f"graph {name!r} is not held")
        path = str(self._directory / name)
        graph = Index.restore(path, view=not writable)
        if graph is None:
            raise LookupError(f"graph {name!r} is missing")
        graph.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # not saved with it
        if not writable:
            self._held = (name, graph)
        return graph

    @staticmethod
    def _new(dimensions: int) -> Any:
        from usearch.index import Index

        return Index(
            ndim=dimensions,
            metric="cos",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )


def scan(rows: np.ndarray, query: bytes, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The `count` of `rows` (signed bytes) nearest the question, compared exactly, best
    first, and their cosines."""
    import numpy as np
    from usearch.index import search

    if not len(rows):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    found = search(
        np.ascontiguousarray(rows, dtype=np.int8),
        np.frombuffer(query, dtype=np.int8),
        min(count, len(rows)),
        "cos",
        exact=True,
        threads=1,
    )
    keys = np.asarray(found.keys, dtype=np.int64)
    cosine = 1.0 - np.asarray(found.distances, dtype=np.float32)
    return keys, cosine
