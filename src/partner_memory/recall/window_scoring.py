"""The window's messages as candidates: scored as the index would score them if they
were stored (`ranking.bm25` with the index's statistics), and by meaning."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import tantivy

from partner_memory.recall.index_layout import (
    WINDOW_BLOCK,
    IndexState,
    read_with_neighbours,
    speaker_number,
)
from partner_memory.recall.ranking import MEANING_CANDIDATES, Pool, Scoring, bm25, unit_vector
from partner_memory.recall.searcher import Doc, Place, Search
from partner_memory.recall.vector_rows import mixed

if TYPE_CHECKING:
    import numpy as np


def window_candidates(
    search: Search,
    words: list[str],
    state: IndexState,
    searcher: tantivy.Searcher,
    scoring: Scoring,
) -> Pool:
    """The window's messages that hold a query word (or sit beside one), scored as the
    index would score them if they were stored."""
    docs = sorted(search.window, key=lambda d: d.position)
    if search.within is not None:
        docs = []
    reach = scoring.neighbours
    texts: list[list[str]] = []
    for i, doc in enumerate(docs):
        beside = [*docs[max(0, i - reach) : i], *docs[i + 1 : i + 1 + reach]]
        texts.append(read_with_neighbours(doc.terms, [o.terms for o in beside], reach))
    documents = searcher.num_docs + len(docs)
    average = (state.tokens + sum(len(t) for t in texts)) / max(1, documents)
    df = {w: searcher.doc_freq("text", w) + sum(1 for t in texts if w in t) for w in words}
    score: list[float] = []
    time: list[float | None] = []
    speaker: list[float | None] = []
    place: list[Place | None] = []
    near: list[bytes | None] = []
    asks: list[float | None] = []
    for i, (doc, text) in enumerate(zip(docs, texts, strict=True)):
        if not search.admits(doc):
            continue
        value = sum(
            bm25(text.count(w), len(text), average, documents, df[w]) for w in words if w in text
        )
        if value <= 0:
            continue
        score.append(value)
        time.append(doc.timestamp)
        speaker.append(speaker_number(doc.speaker))
        place.append((None, doc.position))
        near.append(window_vector(docs, i, reach))
        asks.append(doc.asks)
    return Pool.of(
        score=score,
        block=[WINDOW_BLOCK] * len(score),
        time=time,
        speaker=speaker,
        vecno=[None] * len(score),
        address=[None] * len(score),
        place=place,
        near=near,
        asks=asks,
    )


def window_by_meaning(
    search: Search, found: set[Place], vector: np.ndarray
) -> tuple[Pool, dict[int, float]]:
    """The window's messages nearest the question that its words did not find, nearest
    first; and the cosines of the nearest of all it admits, by position (each read
    alone, as the stored ones are compared)."""
    import numpy as np

    from partner_memory.recall.embed import unit_rows

    docs = sorted(search.window, key=lambda d: d.position)
    if search.within is not None or not docs:
        return Pool.empty(), {}
    width = len(vector)
    chosen: list[tuple[int, bytes]] = []
    for i, doc in enumerate(docs):
        if doc.vector is None or len(doc.vector) != width or not search.admits(doc):
            continue
        chosen.append((i, doc.vector))
    if not chosen:
        return Pool.empty(), {}
    matrix = unit_rows(
        np.stack([np.frombuffer(n, dtype=np.int8) for _, n in chosen]).astype(np.float32)
    )
    query = unit_vector(vector)
    cosine = matrix @ query
    order = np.argsort(-cosine, kind="stable")
    near = {docs[chosen[int(j)][0]].position: float(cosine[j]) for j in order[:MEANING_CANDIDATES]}
    picked = [
        (chosen[int(j)], float(cosine[j]))
        for j in order
        if (None, docs[chosen[int(j)][0]].position) not in found
    ][:MEANING_CANDIDATES]
    return Pool.of(
        score=[0.0] * len(picked),
        block=[WINDOW_BLOCK] * len(picked),
        time=[docs[i].timestamp for (i, _), _ in picked],
        speaker=[speaker_number(docs[i].speaker) for (i, _), _ in picked],
        vecno=[None] * len(picked),
        address=[None] * len(picked),
        place=[(None, docs[i].position) for (i, _), _ in picked],
        near=[n for (_, n), _ in picked],
        meant=[c for _, c in picked],
        asks=[docs[i].asks for (i, _), _ in picked],
    ), near


def window_vector(docs: Sequence[Doc], i: int, reach: int) -> bytes | None:
    own = docs[i].vector
    if own is None:
        return None
    beside = [d.vector for d in [*docs[max(0, i - reach) : i], *docs[i + 1 : i + 1 + reach]]]
    return mixed(own, beside)


def window_block_score(
    search: Search, words: list[str], state: IndexState, searcher: tantivy.Searcher
) -> float:
    """The window as one block: its score among the stored blocks."""
    if not search.window:
        return 0.0
    held = [t for d in search.window for t in d.terms]
    documents = searcher.num_docs + 1
    average = (state.block_tokens + len(held)) / documents
    return sum(
        bm25(held.count(w), len(held), average, documents, searcher.doc_freq("text", w) + 1)
        for w in words
        if w in held
    )
