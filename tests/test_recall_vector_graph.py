"""Meaning beyond exact comparison: once an index's vector rows outgrow `EXACT_ROWS`
they are searched through a usearch graph, and the rows after it exactly; every
message stays reachable by meaning, in memory, on disk and after reopening.
(The thresholds are lowered here: the code path is the one a large memory takes.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from partner_memory.recall import vector_graph
from partner_memory.recall.embed import pack
from partner_memory.recall.searcher import Doc, Search
from partner_memory.recall.tantivy_index import TantivyIndex

WIDTH = 32


@pytest.fixture(autouse=True)
def small_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_graph, "EXACT_ROWS", 100)
    monkeypatch.setattr(vector_graph, "GRAPH_TAIL", 60)
    monkeypatch.setattr(vector_graph, "SCANNED_ROWS", 0)  # the graph itself is searched


def _vectors(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, WIDTH)).astype(np.float32)


def _docs(unit: str, vectors: np.ndarray) -> list[Doc]:
    packed = pack(vectors)
    return [Doc(unit, i, ["filler"], vector=v) for i, v in enumerate(packed)]


def _nearest(index: TantivyIndex, vector: np.ndarray) -> list[object]:
    hits = index.search(Search([], k=3, vector=vector))
    return [h.place for h in hits]


@pytest.mark.parametrize("on_disk", [True, False], ids=["disk", "memory"])
def test_every_row_is_found_by_meaning_through_the_graph_and_its_tail(
    tmp_path: Path, on_disk: bool
) -> None:
    index = TantivyIndex(tmp_path / "index" if on_disk else None)
    batches = [_vectors(50, seed) for seed in range(6)]  # 300 rows, 50 per rolling
    for number, batch in enumerate(batches):
        index.add(_docs(f"u{number}", batch))
    state = index.state
    assert state.graph is not None
    assert 0 < state.graph_rows < state.rows  # a graph, and rows after it
    for number, batch in enumerate(batches):
        for position in (0, 17, 49):  # in the graph and in the tail alike
            asked = batch[position] + 0.05 * _vectors(1, 99 + position)[0]
            assert _nearest(index, asked)[0] == (f"u{number}", position)
    if on_disk:
        graphs = list((tmp_path / "index" / "messages").glob("graph-*.usearch"))
        assert state.graph in {g.name for g in graphs}
        assert len(graphs) <= 2  # the current graph and the one before it
        reopened = TantivyIndex(tmp_path / "index")  # a reader maps the saved graph
        assert _nearest(reopened, batches[1][17])[0] == ("u1", 17)


def test_a_rebuild_starts_a_new_graph(tmp_path: Path) -> None:
    index = TantivyIndex(tmp_path / "index")
    rows = _vectors(150, 1)
    index.add(_docs("u", rows))
    first = index.state.graph
    assert first is not None
    index.add(_docs("v", rows[:40]), clear=True)  # below the threshold: no graph
    assert index.state.graph is None
    assert not list((tmp_path / "index" / "messages").glob("graph-*.usearch"))
    assert _nearest(index, rows[7])[0] == ("v", 7)
