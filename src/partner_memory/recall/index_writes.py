"""The index's write path: stored messages into their documents, blocks and vector rows.

The blocks commit first, then the messages with the state: a crash between the
two leaves blocks ahead, and a block never takes a position twice (it keeps the
last it holds), so adding the same messages again is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import tantivy

from partner_memory.recall.index_layout import (
    BLOCK,
    BLOCK_KIND,
    BLOCK_SCHEMA,
    MESSAGE_KIND,
    NO_TIME,
    SCHEMA,
    IndexPart,
    IndexState,
    block_id,
    hash_number,
    message_key,
    read_with_neighbours,
)
from partner_memory.recall.searcher import Doc
from partner_memory.recall.vector_graph import VectorGraph
from partner_memory.recall.vector_rows import VectorRows, mixed


@dataclass(frozen=True, slots=True)
class IndexParts:
    """What one index is made of: the messages' and the blocks' tantivy indexes, the
    vector rows and their graph, and how many neighbours a message is read with."""

    messages: IndexPart
    blocks: IndexPart
    vectors: VectorRows
    graph: VectorGraph
    neighbours: int


def write(
    parts: IndexParts,
    state: IndexState,
    docs: Sequence[Doc],
    *,
    loaded: int | None = None,
    generation: int | None = None,
    embedder: str | None = None,
    clear: bool = False,
) -> IndexState:
    """Add stored messages (a unit's in position order) and commit, with the state
    moved to `loaded` / `generation` / `embedder` where given. `clear` empties the
    index first (a rebuild).

    The blocks commit first, then the messages with the state: a crash between the
    two leaves blocks ahead, and a block never takes a position twice (it keeps the
    last it holds), so adding the same messages again is exact."""
    state = IndexState() if clear else replace(state, speakers=list(state.speakers))
    by_unit: dict[str, list[Doc]] = {}
    for doc in docs:
        if doc.unit is None:
            raise ValueError("a stored message needs its unit id")
        by_unit.setdefault(doc.unit, []).append(doc)
    large = len(docs) > 10_000
    tokens = _add_blocks(parts, by_unit, clear=clear, large=large)
    if clear:
        state.vectors = None  # a new file: readers of the old one keep theirs
    with parts.messages.writing(clear=clear, large=large) as writer:
        messages = None if clear else parts.messages.index.searcher()
        written: list[dict[str, Any]] = []
        rows: list[tuple[bytes, bytes]] = []
        for unit, new in by_unit.items():
            _add_unit(parts, messages, state, unit, new, written=written, rows=rows)
        first = parts.vectors.append(state, rows)
        if parts.graph.wanted(state.rows, state.graph_rows):
            own = parts.vectors.own(state, state.graph_rows)
            state.graph = parts.graph.extend(state.graph, state.graph_rows, own)
            state.graph_rows = state.rows
        for values in written:
            if "vecno" in values:
                values["vecno"] += first
            writer.delete_documents_by_term("key", values["key"])
            writer.add_document(tantivy.Document.from_dict(values, SCHEMA))
        if loaded is not None:
            state.loaded = loaded
        if generation is not None:
            state.generation = generation
        if embedder is not None:
            state.embedder = embedder
        state.block_tokens = tokens
        parts.messages.put_state(writer, asdict(state))
    parts.graph.drop_old(state.graph)
    if clear:
        parts.vectors.drop_old(state)
    return state


def _add_blocks(
    parts: IndexParts, by_unit: dict[str, list[Doc]], *, clear: bool, large: bool
) -> int:
    """Put the messages in their blocks and commit; returns the blocks' terms."""
    with parts.blocks.writing(clear=clear, large=large) as writer:
        blocks = None if clear else parts.blocks.index.searcher()
        tokens = 0 if clear else int(parts.blocks.state().get("tokens", 0))
        for unit, new in by_unit.items():
            by_block: dict[int, list[Doc]] = {}
            for doc in new:
                by_block.setdefault(doc.position // BLOCK, []).append(doc)
            for block, added in sorted(by_block.items()):
                tokens += _add_block(writer, blocks, unit, block, added)
        parts.blocks.put_state(writer, {"tokens": tokens})
    return tokens


def _add_unit(
    parts: IndexParts,
    searcher: tantivy.Searcher | None,
    state: IndexState,
    unit: str,
    new: list[Doc],
    *,
    written: list[dict[str, Any]],
    rows: list[tuple[bytes, bytes]],
) -> None:
    """The documents of `new` and of the messages beside them they rewrite, into
    `written`; their mixed vectors into `rows` (`vecno` counts from the batch's first)."""
    reach = parts.neighbours
    known: dict[int, Doc] = {d.position: d for d in new}
    lengths: dict[int, int] = {}
    if searcher is not None:  # neighbours held already, and any of these added before
        wanted = {
            p + step for p in known for step in range(-2 * reach, 2 * reach + 1) if p + step >= 0
        }
        for position, (doc, length) in _stored(searcher, unit, wanted).items():
            known.setdefault(position, doc)
            lengths[position] = length
    fresh = {d.position for d in new}
    touched = sorted(p for p in known if p in fresh or any(abs(p - q) <= reach for q in fresh))
    unitno = hash_number(unit)
    for position in touched:
        doc = known[position]
        beside = [
            known[position + s] for s in range(-reach, reach + 1) if s and position + s in known
        ]
        text = read_with_neighbours(doc.terms, [o.terms for o in beside], reach)
        key = message_key(unit, position)
        if position in lengths:
            state.tokens -= lengths[position]
            state.messages -= 1
        state.tokens += len(text)
        state.messages += 1
        values: dict[str, Any] = {
            "kind": MESSAGE_KIND,
            "key": key,
            "unit": unit,
            "unitno": unitno,
            "pos": position,
            "blockid": block_id(unit, position // BLOCK),
            "time": NO_TIME if doc.timestamp is None else doc.timestamp,
            "text": " ".join(text),
            "length": len(text),
            "own": " ".join(doc.terms).encode(),
            "asks": int(doc.asks),
        }
        if doc.role is not None:
            values["role"] = doc.role
        if doc.tags:
            values["tags"] = list(doc.tags)
        if doc.speaker:
            name = doc.speaker.lower()
            values["speaker"] = hash_number(name)
            values["meta"] = name.encode()
            if name not in state.speakers:
                state.speakers.append(name)
        if doc.vector is not None:
            values["vec"] = doc.vector
            state.dimensions = state.dimensions or len(doc.vector)
            if len(doc.vector) == state.dimensions:  # one width per index
                values["vecno"] = len(rows)
                rows.append((doc.vector, mixed(doc.vector, [o.vector for o in beside])))
        written.append(values)
        if doc.timestamp is not None and (state.newest is None or doc.timestamp > state.newest):
            state.newest = doc.timestamp


def _add_block(
    writer: tantivy.IndexWriter,
    searcher: tantivy.Searcher | None,
    unit: str,
    block: int,
    added: list[Doc],
) -> int:
    """Put `added` in their block; returns the terms it gained."""
    key = f"b\x1f{unit}\x1f{block}"
    held: list[str] = []
    last = -1
    if searcher is not None:
        found = searcher.search(tantivy.Query.term_query(BLOCK_SCHEMA, "key", key), 1).hits
        if found:
            stored = searcher.doc(found[0][1]).to_dict()
            held = bytes(stored["own"][0]).decode().split()
            last = int(stored["last"][0])
    fresh = [d for d in added if d.position > last]
    if not fresh:
        return 0
    words = held + [t for d in fresh for t in d.terms]
    writer.delete_documents_by_term("key", key)
    writer.add_document(
        tantivy.Document.from_dict(
            {
                "kind": BLOCK_KIND,
                "key": key,
                "unitno": hash_number(unit),
                "pos": block,
                "blockid": block_id(unit, block),
                "last": max(last, *(d.position for d in fresh)),
                "text": " ".join(words),
                "own": " ".join(words).encode(),
            },
            BLOCK_SCHEMA,
        )
    )
    return len(words) - len(held)


def _stored(
    searcher: tantivy.Searcher, unit: str, positions: Iterable[int]
) -> dict[int, tuple[Doc, int]]:
    """The stored messages of `unit` at `positions` (those it has), with the length
    of their text."""
    keys = [message_key(unit, p) for p in positions]
    if not keys:
        return {}
    query = tantivy.Query.term_set_query(SCHEMA, "key", keys)
    found: dict[int, tuple[Doc, int]] = {}
    for _, address in searcher.search(query, len(keys)).hits:
        stored = searcher.doc(address).to_dict()
        own = bytes(stored["own"][0]).decode().split()
        position = int(stored["pos"][0])
        time = int(stored["time"][0])
        speaker = stored.get("meta")
        vector = stored.get("vec")
        role = stored.get("role")
        asking = stored.get("asks")
        found[position] = (
            Doc(
                unit,
                position,
                own,
                bytes(speaker[0]).decode() if speaker else None,
                None if time == NO_TIME else time,
                bytes(vector[0]) if vector else None,
                str(role[0]) if role else None,
                [str(t) for t in stored.get("tags", [])],
                bool(asking and asking[0]),
            ),
            int(stored["length"][0]),
        )
    return found
