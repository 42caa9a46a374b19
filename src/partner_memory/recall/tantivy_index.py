"""One namespace's recall index on tantivy: BM25 over each message read with its neighbours.

What we measured on the LoCoMo dev conversations decides the documents. A
message alone is a poor document; a message counted with the two before and
the two after it in its memory session, at half weight, finds far more: so a
message's `text` holds its own terms twice and its neighbours' once (a new
rolling rewrites the last messages before it, whose neighbours it brings). A
block of `BLOCK` consecutive messages of a unit is a document of a second
index (its own statistics), whose score, divided by the best, is added at
`unit_weight` to its messages' (the session score); the participant a
question names counts `speaker_boost` times. The best `DENSE_CANDIDATES` are
rescored by meaning: each message keeps its vector mixed with its neighbours'
(half weight again), compared with the question's; and the messages nearest
the question by their own vector that mean it more than any its words found
join them (a paraphrase shares no word). These parameters reproduce the
scorer this index replaced, category by category, on LoCoMo dev (79.4 % at
10; 79.6 with the dates messages point to, `recall.said_dates`).

The index's own state (what it holds, up to which rolling, of which
generation) is a document in it, so it commits with the messages it speaks
of: a crash leaves the index as of its last commit, never half-updated.
Segments are memory-mapped: opening an index costs milliseconds at any size
and its pages are the operating system's to keep or drop.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tantivy

from partner_memory.recall.searcher import Doc, Hit, Place, Search
from partner_memory.recall.vector_graph import VectorGraph

if TYPE_CHECKING:
    import numpy as np

#: Neighbours on each side read with a message; a message's own terms count this many
#: times beside each neighbour's once (neighbours at half weight).
NEIGHBOURS, OWN_REPEAT = 2, 2
#: Messages per block document (the session score of a long unit stays local).
BLOCK = 256
#: Weight of the block score next to the message's own.
UNIT_WEIGHT = 0.3
#: Messages of the one participant a query names count this much more.
SPEAKER_BOOST = 2.0
#: Messages said when a query's date names score this much more.
DATE_BOOST = 1.5
#: A gathering question's hit counts this much less for each better one of its session
#: (LoCoMo dev R@10: multi-hop 47.2 -> 51.8, the other categories unchanged; 0.5-0.9
#: measured, 80.1-80.6 overall).
SPREAD = 0.75
#: Candidates by words the boosts are applied to (150-800 measured alike on LoCoMo dev).
POOL = 150
#: Messages rescored by meaning, and the weight of the cosine (from 0 at the least of them
#: to 1 at the most, `_scaled`).
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
#: tantivy's BM25 constants (the window's messages are scored with the same).
K1, B = 1.2, 0.75
#: Memory a writer may fill before it writes a segment: tantivy's least for a rolling's
#: few messages, more for a rebuild (fewer, larger segments).
WRITER_HEAP, REBUILD_HEAP = 15_000_000, 64_000_000

#: The documents' layout: an index of another layout is never opened (it is rebuilt).
INDEX_FORMAT = 5

_MESSAGE, _BLOCK, _STATE = 0, 1, 2
_STATE_KEY = "state"
_NO_TIME = -(2**63)


def _hash(text: str) -> int:
    """A stable 64-bit signed number for a unit id or a speaker (tantivy's fast fields
    are numbers)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), signed=True)


def _schema(*, blocks: bool) -> tantivy.Schema:
    """Messages, or blocks: each kept in an index of its own, so each has its own
    statistics (a word's rarity among blocks is not its rarity among messages)."""
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("kind", indexed=True, fast=True)
    builder.add_text_field("key", tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("unitno", indexed=True, fast=True)
    builder.add_integer_field("pos", stored=True, indexed=True, fast=True)
    builder.add_integer_field("blockid", indexed=True, fast=True)  # its block, by number
    builder.add_text_field("text", tokenizer_name="whitespace", index_option="freq")
    builder.add_bytes_field("own", stored=True)  # the message's terms; the block's
    builder.add_bytes_field("meta", stored=True)  # the speaker's name; the state
    if blocks:
        builder.add_integer_field("last", stored=True)  # the last position it holds
        return builder.build()
    builder.add_text_field("unit", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("speaker", indexed=True, fast=True)
    builder.add_text_field("role", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("tags", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("time", stored=True, indexed=True, fast=True)
    builder.add_integer_field("length", stored=True)  # terms in `text`
    builder.add_bytes_field("vec", stored=True)  # its own vector
    builder.add_integer_field("vecno", indexed=True, fast=True)  # its row of mixed vectors
    return builder.build()


SCHEMA = _schema(blocks=False)
BLOCK_SCHEMA = _schema(blocks=True)


@dataclass(slots=True)
class IndexState:
    """What an index holds, kept in it."""

    #: The namespace's recall generation it was built for (None: built for none yet).
    generation: int | None = None
    #: Every rolling up to this log sequence number is in it (-1: nothing).
    loaded: int = -1
    embedder: str | None = None
    #: Messages and blocks, and their terms (the averages of BM25).
    messages: int = 0
    tokens: int = 0
    block_tokens: int = 0
    newest: int | None = None
    speakers: list[str] = field(default_factory=list)
    #: The file of vector rows (each message's own vector, then mixed with its
    #: neighbours'), the rows it holds for the index, and the vectors' width.
    vectors: str | None = None
    rows: int = 0
    dimensions: int = 0
    #: The graph of the rows `[0, graph_rows)` (`recall.vector_graph`), once they outgrew
    #: exact comparison; the rows after it are compared exactly.
    graph: str | None = None
    graph_rows: int = 0


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
class _Pool:
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

    def __len__(self) -> int:
        return len(self.address)

    @staticmethod
    def empty() -> _Pool:
        return _Pool.of(
            score=[], block=[], time=[], speaker=[], vecno=[], address=[], place=[], near=[]
        )

    def take(self, chosen: Sequence[int]) -> _Pool:
        """These candidates, in this order."""
        import numpy as np

        at = np.asarray(chosen, dtype=np.intp)
        return _Pool(
            self.score[at],
            self.block[at],
            self.time[at],
            self.speaker[at],
            self.vecno[at],
            [self.address[i] for i in chosen],
            [self.place[i] for i in chosen],
            [self.near[i] for i in chosen],
        )

    def __add__(self, other: _Pool) -> _Pool:
        import numpy as np

        return _Pool(
            np.concatenate([self.score, other.score]),
            np.concatenate([self.block, other.block]),
            np.concatenate([self.time, other.time]),
            np.concatenate([self.speaker, other.speaker]),
            np.concatenate([self.vecno, other.vecno]),
            self.address + other.address,
            self.place + other.place,
            self.near + other.near,
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
    ) -> _Pool:
        return _Pool(
            _column(score, 0, "float64"),
            _column(block, 0),
            _column(time, _NO_TIME),
            _column(speaker, 0),
            _column(vecno, -1),
            address,
            place,
            near,
        )


class _Part:
    """One tantivy index (the messages', or the blocks') and its state document."""

    def __init__(self, schema: tantivy.Schema, directory: Path | None) -> None:
        self.schema = schema
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self.index = tantivy.Index(schema, path=str(directory), reuse=True)
        else:
            self.index = tantivy.Index(schema)
        self.index.config_reader(reload_policy="Manual")

    def state(self) -> dict[str, Any]:
        searcher = self.index.searcher()
        found = searcher.search(tantivy.Query.term_query(self.schema, "key", _STATE_KEY), 1).hits
        if not found:
            return {}
        state: dict[str, Any] = json.loads(searcher.doc(found[0][1]).get_first("meta") or b"{}")
        return state

    @contextmanager
    def writing(self, *, clear: bool, large: bool) -> Iterator[tantivy.IndexWriter]:
        """A writer, committed (with its merges done) when the block ends."""
        writer = self.index.writer(REBUILD_HEAP if large else WRITER_HEAP, 1)
        try:
            if clear:
                writer.delete_all_documents()
            yield writer
            writer.commit()
            writer.wait_merging_threads()
        except BaseException:
            writer.rollback()
            raise
        if clear:  # the files of the deleted segments go now (a forget's text leaves the disk)
            collector = self.index.writer(WRITER_HEAP, 1)
            collector.garbage_collect_files()
            collector.wait_merging_threads()
        self.index.reload()

    def put_state(self, writer: tantivy.IndexWriter, state: dict[str, Any]) -> None:
        writer.delete_documents_by_term("key", _STATE_KEY)
        writer.add_document(
            tantivy.Document.from_dict(
                {"kind": _STATE, "key": _STATE_KEY, "meta": json.dumps(state).encode()},
                self.schema,
            )
        )


class _VectorRows:
    """Each message's vectors in a file the index's messages point into (`vecno`): a row
    of signed bytes holds its own vector (what `nearest` compares: a message alone finds
    a paraphrase best, 63 % of the suite at 5 against 48 % mixed) and then its vector
    mixed with its neighbours' (what rescoring compares). Read through a memory map, so a
    search reads the rows of its candidates only. Rows are only ever appended (a message
    rewritten gets a new row), and a rebuild starts a new file, so a reader's map is never
    cut short under it."""

    def __init__(self, directory: Path | None) -> None:
        self._directory = directory
        self._memory = bytearray()  # the rows when the index is in memory
        self._mapped: np.ndarray | None = None
        self._name: str | None = None
        #: The rows normalised, for `nearest`: (file, first, end) they are of, and the copy.
        self._normal: tuple[tuple[str | None, int, int], np.ndarray] | None = None

    def nearest(
        self, state: IndexState, vector: np.ndarray, count: int, start: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """The `count` rows from `start` on nearest `vector` by cosine, compared exactly
        (best first), and their cosines."""
        import numpy as np

        normal = self._normalised(state, start)
        query = _unit(vector)
        cosine = normal @ query
        count = min(count, len(cosine))
        if count <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        top = np.argpartition(-cosine, count - 1)[:count]
        order = top[np.argsort(-cosine[top], kind="stable")]
        return order + start, cosine[order]

    def own(self, state: IndexState, start: int) -> np.ndarray:
        """The own vectors of rows `[start, rows)`."""
        return self._matrix(state)[start : state.rows, : state.dimensions]

    def _normalised(self, state: IndexState, start: int) -> np.ndarray:
        """Rows `[start, rows)` at length 1, kept and extended as rows are added."""
        import numpy as np

        from partner_memory.recall.embed import unit_rows

        held = self._normal
        if held is not None and held[0] == (state.vectors, start, state.rows):
            return held[1]
        same = held is not None and held[0][:2] == (state.vectors, start)
        before = held[1] if held is not None and same else None
        done = 0 if before is None else min(len(before), state.rows - start)
        fresh = unit_rows(np.asarray(self.own(state, start + done), dtype=np.float32))
        normal = fresh if before is None or not done else np.concatenate([before[:done], fresh])
        self._normal = ((state.vectors, start, state.rows), normal)
        return normal

    def append(self, state: IndexState, vectors: list[tuple[bytes, bytes]]) -> int:
        """Write each (own, mixed) pair as a row (durably, before the commit that points
        at them); returns the number of the first."""
        first = state.rows
        if not vectors:
            return first
        width = 2 * state.dimensions
        rows = [own + mixed for own, mixed in vectors]
        if self._directory is None:
            del self._memory[first * width :]  # rows of an add that failed before its commit
            for row in rows:
                self._memory += row
        else:
            if state.vectors is None:
                state.vectors = f"vectors-{uuid.uuid4().hex}.i8"
            with open(self._directory / state.vectors, "r+b" if first else "wb") as out:
                out.seek(first * width)
                out.truncate()
                for row in rows:
                    out.write(row)
                out.flush()
                os.fsync(out.fileno())
        state.rows = first + len(rows)
        return first

    def read(self, state: IndexState, numbers: np.ndarray, alone: np.ndarray) -> np.ndarray | None:
        """The vectors of rows `numbers` (-1: none) as float32, zeros where a message has
        none: mixed with the neighbours', or its own where `alone`."""
        import numpy as np

        width = state.dimensions
        if not width or not state.rows:
            return None
        matrix = self._matrix(state)
        out = np.zeros((len(numbers), width), dtype=np.float32)
        for own, half in ((False, slice(width, None)), (True, slice(0, width))):
            held = (numbers >= 0) & (numbers < len(matrix)) & (alone == own)
            out[held] = matrix[numbers[held], half]
        return out

    def _matrix(self, state: IndexState) -> np.ndarray:
        import numpy as np

        width = 2 * state.dimensions
        mapped = self._mapped
        if mapped is None or self._name != state.vectors or len(mapped) != state.rows:
            if self._directory is None:  # a copy, made again only when rows were added
                held = bytes(self._memory[: state.rows * width])
                mapped = np.frombuffer(held, dtype=np.int8).reshape(-1, width)
            else:
                path = self._directory / str(state.vectors)  # the committed rows only
                mapped = np.memmap(path, dtype=np.int8, mode="r", shape=(state.rows, width))
            self._mapped, self._name = mapped, state.vectors
        return mapped

    def drop_old(self, state: IndexState) -> None:
        """Delete the files of earlier rebuilds (a reader still mapping one keeps it)."""
        if self._directory is None:
            return
        for path in self._directory.glob("vectors-*.i8"):
            if path.name != state.vectors:
                path.unlink(missing_ok=True)


class TantivyIndex:
    """One namespace's index in `directory` (None: in memory): the messages' index, and
    the blocks' beside it. Writes are the caller's to serialise (`IndexReplicas` does,
    across threads and processes)."""

    def __init__(self, directory: Path | None = None, scoring: Scoring | None = None) -> None:
        self.scoring = scoring or Scoring()
        self.directory = directory
        self._messages = _Part(SCHEMA, None if directory is None else directory / "messages")
        self._blocks = _Part(BLOCK_SCHEMA, None if directory is None else directory / "blocks")
        self._vectors = _VectorRows(None if directory is None else directory / "messages")
        self._graph = VectorGraph(None if directory is None else directory / "messages")
        self._state = IndexState(**self._messages.state())

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
        index first (a rebuild).

        The blocks commit first, then the messages with the state: a crash between the
        two leaves blocks ahead, and a block never takes a position twice (it keeps the
        last it holds), so adding the same messages again is exact."""
        state = IndexState() if clear else replace(self._state, speakers=list(self._state.speakers))
        by_unit: dict[str, list[Doc]] = {}
        for doc in docs:
            if doc.unit is None:
                raise ValueError("a stored message needs its unit id")
            by_unit.setdefault(doc.unit, []).append(doc)
        large = len(docs) > 10_000
        tokens = self._add_blocks(by_unit, clear=clear, large=large)
        if clear:
            state.vectors = None  # a new file: readers of the old one keep theirs
        with self._messages.writing(clear=clear, large=large) as writer:
            messages = None if clear else self._messages.index.searcher()
            written: list[dict[str, Any]] = []
            rows: list[tuple[bytes, bytes]] = []
            for unit, new in by_unit.items():
                self._add_unit(messages, state, unit, new, written=written, rows=rows)
            first = self._vectors.append(state, rows)
            if self._graph.wanted(state.rows, state.graph_rows):
                own = self._vectors.own(state, state.graph_rows)
                state.graph = self._graph.extend(state.graph, state.graph_rows, own)
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
            self._messages.put_state(writer, asdict(state))
        self._state = state
        self._graph.drop_old(state.graph)
        if clear:
            self._vectors.drop_old(state)

    def _add_blocks(self, by_unit: dict[str, list[Doc]], *, clear: bool, large: bool) -> int:
        """Put the messages in their blocks and commit; returns the blocks' terms."""
        with self._blocks.writing(clear=clear, large=large) as writer:
            blocks = None if clear else self._blocks.index.searcher()
            tokens = 0 if clear else int(self._blocks.state().get("tokens", 0))
            for unit, new in by_unit.items():
                by_block: dict[int, list[Doc]] = {}
                for doc in new:
                    by_block.setdefault(doc.position // BLOCK, []).append(doc)
                for block, added in sorted(by_block.items()):
                    tokens += self._add_block(writer, blocks, unit, block, added)
            self._blocks.put_state(writer, {"tokens": tokens})
        return tokens

    def _add_unit(
        self,
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
        reach = self.scoring.neighbours
        known: dict[int, Doc] = {d.position: d for d in new}
        lengths: dict[int, int] = {}
        if searcher is not None:  # neighbours held already, and any of these added before
            wanted = {
                p + step
                for p in known
                for step in range(-2 * reach, 2 * reach + 1)
                if p + step >= 0
            }
            for position, (doc, length) in self._stored(searcher, unit, wanted).items():
                known.setdefault(position, doc)
                lengths[position] = length
        fresh = {d.position for d in new}
        touched = sorted(p for p in known if p in fresh or any(abs(p - q) <= reach for q in fresh))
        unitno = _hash(unit)
        for position in touched:
            doc = known[position]
            beside = [
                known[position + s] for s in range(-reach, reach + 1) if s and position + s in known
            ]
            text = [*doc.terms] * (OWN_REPEAT if reach else 1)
            for other in beside:
                text.extend(other.terms)
            key = _message_key(unit, position)
            if position in lengths:
                state.tokens -= lengths[position]
                state.messages -= 1
            state.tokens += len(text)
            state.messages += 1
            values: dict[str, Any] = {
                "kind": _MESSAGE,
                "key": key,
                "unit": unit,
                "unitno": unitno,
                "pos": position,
                "blockid": _block_id(unit, position // BLOCK),
                "time": _NO_TIME if doc.timestamp is None else doc.timestamp,
                "text": " ".join(text),
                "length": len(text),
                "own": " ".join(doc.terms).encode(),
            }
            if doc.role is not None:
                values["role"] = doc.role
            if doc.tags:
                values["tags"] = list(doc.tags)
            if doc.speaker:
                name = doc.speaker.lower()
                values["speaker"] = _hash(name)
                values["meta"] = name.encode()
                if name not in state.speakers:
                    state.speakers.append(name)
            if doc.vector is not None:
                values["vec"] = doc.vector
                state.dimensions = state.dimensions or len(doc.vector)
                if len(doc.vector) == state.dimensions:  # one width per index
                    values["vecno"] = len(rows)
                    rows.append((doc.vector, _mixed(doc.vector, [o.vector for o in beside])))
            written.append(values)
            if doc.timestamp is not None and (state.newest is None or doc.timestamp > state.newest):
                state.newest = doc.timestamp

    @staticmethod
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
                    "kind": _BLOCK,
                    "key": key,
                    "unitno": _hash(unit),
                    "pos": block,
                    "blockid": _block_id(unit, block),
                    "last": max(last, *(d.position for d in fresh)),
                    "text": " ".join(words),
                    "own": " ".join(words).encode(),
                },
                BLOCK_SCHEMA,
            )
        )
        return len(words) - len(held)

    @staticmethod
    def _stored(
        searcher: tantivy.Searcher, unit: str, positions: Iterable[int]
    ) -> dict[int, tuple[Doc, int]]:
        """The stored messages of `unit` at `positions` (those it has), with the length
        of their text."""
        keys = [_message_key(unit, p) for p in positions]
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
            found[position] = (
                Doc(
                    unit,
                    position,
                    own,
                    bytes(speaker[0]).decode() if speaker else None,
                    None if time == _NO_TIME else time,
                    bytes(vector[0]) if vector else None,
                    str(role[0]) if role else None,
                    [str(t) for t in stored.get("tags", [])],
                ),
                int(stored["length"][0]),
            )
        return found

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
        pool = _Pool.empty()
        near = None
        if words:
            # tantivy searches without the GIL: the words' search runs on another core
            # while this thread finds the rows nearest the question's meaning
            asked = _beside().submit(self._candidates, searcher, words, search)
            near = self._near(searcher, search) if dense else None
            pool = asked.result() + _window_candidates(
                search, words, self._state, searcher, self.scoring
            )
        elif dense:
            near = self._near(searcher, search)
        blocks = None
        if words and self.scoring.unit_weight:  # the sessions' scores, while meaning adds
            ask = pool.block if near is None else np.union1d(pool.block, near.docs.block)
            blocks = _Blocks(_beside().submit(self._block_scores, words, ask), ask)
        if dense:
            pool = pool + self._by_meaning(searcher, search, pool, near)
        if len(pool):
            hits = self._rank(searcher, pool, words, search, blocks)
        if search.fill and (search.bounded or search.within is not None) and len(hits) < search.k:
            hits += self._by_time(searcher, search, {h.place for h in hits})
        return hits

    def _filters(self, search: Search) -> list[tuple[tantivy.Occur, tantivy.Query]]:
        must = tantivy.Occur.Must
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []  # only messages have text
        if search.bounded:
            clauses.append((must, _time_range(search.since, search.until)))
        if search.within is not None:
            ranges = [
                (tantivy.Occur.Should, _positions(unit, start, end))
                for unit, start, end in search.within
                if end > start
            ]
            clauses.append((must, tantivy.Query.boolean_query(ranges) if ranges else _nothing()))
        where = search.where
        if where is not None:
            if where.role is not None:
                clauses.append((must, tantivy.Query.term_query(SCHEMA, "role", where.role)))
            if where.speaker_name is not None:
                speaker = _hash(where.speaker_name)
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

    def _candidates(self, searcher: tantivy.Searcher, words: list[str], search: Search) -> _Pool:
        found = []
        if self._state.messages:
            query = self._filtered(search, _any_of(SCHEMA, words))
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

    def _by_meaning(
        self,
        searcher: tantivy.Searcher,
        search: Search,
        pool: _Pool,
        near: _Near | None,
    ) -> _Pool:
        """The messages nearest the question's meaning (`near`) that its words did not
        find, and that mean it more than any the words found (so a question whose words
        find what it asks for is not padded with what merely resembles it). Scored 0 by
        words: only meaning ranks them."""

        vector = search.vector
        assert vector is not None
        floor = self._floor(pool, search, vector)
        stored = _Pool.empty()
        if near is not None:
            have = {int(v) for v in pool.vecno if v >= 0}
            meant = {int(r) for r, c in zip(near.rows, near.cosine, strict=True) if c > floor}
            meant -= have
            chosen = [i for i, v in enumerate(near.docs.vecno) if int(v) in meant]
            stored = near.docs.take(chosen[:MEANING_CANDIDATES])
        have_places = {p for p in pool.place if p}
        return stored + _window_by_meaning(search, have_places, vector, floor)

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
        keys, near = self._graph.nearest(state.graph, query, count)
        rows, cosine = np.concatenate([keys, rows]), np.concatenate([near, cosine])
        order = np.argsort(-cosine, kind="stable")[:count]
        return rows[order], cosine[order]

    def _floor(self, pool: _Pool, search: Search, vector: np.ndarray) -> float:
        """The best cosine of a message the words found (alone, among their best):
        what a message found by meaning alone must beat. 0 when words found none."""
        import numpy as np

        from partner_memory.recall.embed import unit_rows

        if not len(pool):
            return 0.0
        best = np.argsort(-pool.score, kind="stable")[:DENSE_CANDIDATES]
        width = len(vector)
        rows = np.zeros((len(best), width), dtype=np.float32)
        if self._state.dimensions == width:
            stored = self._vectors.read(self._state, pool.vecno[best], np.ones(len(best), bool))
            if stored is not None:
                rows[:] = stored
        window = {d.position: d.vector for d in search.window}
        for i, candidate in enumerate(best):
            place = pool.place[candidate]
            own = window.get(place[1]) if place is not None else None
            if own is not None and len(own) == width:
                rows[i] = np.frombuffer(own, dtype=np.int8)
        query = _unit(vector)
        return max(0.0, float((unit_rows(rows) @ query).max()))

    def _block_scores(self, words: list[str], blocks: np.ndarray) -> dict[int, float]:
        """The scores of these blocks for the words (those that hold one)."""
        searcher = self._blocks.index.searcher()
        wanted = sorted({int(b) for b in blocks if b != _WINDOW_BLOCK})
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
                (tantivy.Occur.Must, _any_of(BLOCK_SCHEMA, words)),
            ]
        )
        found = searcher.search(query, len(wanted), count=False).hits
        ids = searcher.fast_field_values("blockid", [a for _, a in found]) if found else []
        return {int(b or 0): score for (score, _), b in zip(found, ids, strict=True)}

    def _rank(
        self,
        searcher: tantivy.Searcher,
        pool: _Pool,
        words: list[str],
        search: Search,
        early: _Blocks | None,
    ) -> list[Hit]:
        import numpy as np

        scoring = self.scoring
        final = pool.score / (pool.score.max() or 1.0)
        if early is not None:
            # a block's score does not depend on which others are asked for: those asked
            # for beside the pool's (near by meaning, not chosen) are left out
            present = {int(b) for b in pool.block}
            blocks = {b: v for b, v in early.scores.result().items() if b in present}
            missing = np.setdiff1d(pool.block, early.asked)
            if len(missing):
                blocks.update(self._block_scores(words, missing))
            window = _window_block_score(search, words, self._state, self._blocks.index.searcher())
            if window:
                blocks[_WINDOW_BLOCK] = window
            if blocks:
                top = max(blocks.values())
                scores = np.array([blocks.get(int(b), 0.0) for b in pool.block]) / top
                final += scoring.unit_weight * scores
        if search.speaker is not None and scoring.speaker_boost != 1.0:
            named = pool.speaker == _hash(search.speaker.lower())
            final *= np.where(named, scoring.speaker_boost, 1.0)
        preferred = self._preferred(pool, search)
        if preferred is not None:
            final *= np.where(preferred, scoring.date_boost, 1.0)
        dense = search.vector is not None and scoring.dense_weight > 0
        size = min(len(pool), max(search.k, DENSE_CANDIDATES) if dense else search.k)
        best = np.lexsort((np.arange(len(final)), -final))[:size]
        if dense:  # and every one found by meaning alone
            best = np.concatenate([best, np.setdiff1d(np.flatnonzero(pool.score == 0), best)])
        best_score = final[best]
        if dense and search.vector is not None:
            matrix = self._vectors_of(pool, best, len(search.vector))
            if matrix is not None:
                question = _unit(search.vector)
                gained = _scaled(matrix @ question)
                if scoring.feedback > 0:  # the question, moved towards its best answers
                    first = best_score + scoring.dense_weight * gained
                    leaders = np.lexsort((np.arange(len(first)), -first))[:FEEDBACK]
                    leaders = leaders[pool.score[best][leaders] > 0]  # found by words too
                    if len(leaders):
                        moved = question + scoring.feedback * matrix[leaders].mean(axis=0)
                        gained = _scaled(matrix @ _unit(moved))
                best_score = best_score + scoring.dense_weight * gained
        ranked = np.lexsort((np.arange(len(best_score)), -best_score))
        if search.spread and scoring.spread != 1.0:
            ranked = _spread(ranked, best_score, pool.block[best], scoring.spread, search.k)
        ranked = ranked[: search.k]
        return [self._hit(searcher, pool, int(best[i]), float(best_score[i])) for i in ranked]

    @staticmethod
    def _preferred(pool: _Pool, search: Search) -> np.ndarray | None:
        """Which candidates were said when the question's date names (None: it names none)."""
        if search.prefer is None or search.prefer == (None, None):
            return None
        start, end = search.prefer
        inside: np.ndarray = pool.time != _NO_TIME
        if start is not None:
            inside &= pool.time >= start
        if end is not None:
            inside &= pool.time < end
        return inside

    def _vectors_of(self, pool: _Pool, best: np.ndarray, width: int) -> np.ndarray | None:
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
    def _hit(searcher: tantivy.Searcher, pool: _Pool, i: int, score: float) -> Hit:
        place = pool.place[i]
        return Hit(place if place is not None else _place(searcher.doc(pool.address[i])), score)

    def _by_time(self, searcher: tantivy.Searcher, search: Search, have: set[Place]) -> list[Hit]:
        """The first messages of [since, until) (or of a topic's ranges) in time order,
        scored 0: what the date alone finds (stored and window messages alike)."""
        want = search.k - len(have)
        messages = tantivy.Query.term_query(SCHEMA, "kind", _MESSAGE)
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, messages), *self._filters(search)]
        )
        found = searcher.search(
            query, want + len(have), count=False, order_by_field="time", order=tantivy.Order.Asc
        ).hits
        timed: list[tuple[int, tuple[str, int], Place]] = []
        for time, address in found:
            place = _place(searcher.doc(address))
            timed.append((int(time), (place[0] or "", place[1]), place))
        if search.within is None:
            timed += [
                (d.timestamp, ("\uffff", d.position), (None, d.position))  # after the stored
                for d in search.window
                if d.timestamp is not None and search.admits(d)
            ]
        timed.sort()
        return [Hit(place, 0.0) for _, _, place in timed if place not in have][:want]


#: The window's messages are a block of their own.
_WINDOW_BLOCK = 0


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
    docs: _Pool


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


def _spread(
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


def _place(stored: tantivy.Document) -> Place:
    return (str(stored.get_first("unit")), int(stored.get_first("pos") or 0))


def _stored_pool(searcher: tantivy.Searcher, addresses: list[Any], score: list[float]) -> _Pool:
    """Stored candidates, with what ranking reads of them (their fast fields)."""

    def column(name: str) -> list[float | None]:
        return searcher.fast_field_values(name, addresses) if addresses else []

    return _Pool.of(
        score=score,
        block=column("blockid"),
        time=column("time"),
        speaker=column("speaker"),
        vecno=column("vecno"),
        address=addresses,
        place=[None] * len(addresses),
        near=[None] * len(addresses),
    )


def _column(values: Sequence[float | None], missing: int, dtype: str | None = None) -> np.ndarray:
    """A fast field's values as an array (`missing` where a document has none)."""
    import numpy as np

    kind = "int64" if dtype is None else dtype
    if not values:
        return np.zeros(0, dtype=kind)
    return np.array([missing if v is None else v for v in values], dtype=kind)


def _speaker_number(speaker: str | None) -> int | None:
    return _hash(speaker.lower()) if speaker else None


def _block_id(unit: str, block: int) -> int:
    return _hash(f"{unit}\x1f{block}") or 1  # never the window's


def _any_of(schema: tantivy.Schema, words: list[str]) -> tantivy.Query:
    should = tantivy.Occur.Should
    return tantivy.Query.boolean_query(
        [(should, tantivy.Query.term_query(schema, "text", w)) for w in words]
    )


def _positions(unit: str, start: int, end: int) -> tantivy.Query:
    must = tantivy.Occur.Must
    return tantivy.Query.boolean_query(
        [
            (must, tantivy.Query.term_query(SCHEMA, "unitno", _hash(unit))),
            (
                must,
                tantivy.Query.range_query(
                    SCHEMA, "pos", tantivy.FieldType.Integer, start, end, include_upper=False
                ),
            ),
        ]
    )


def _message_key(unit: str, position: int) -> str:
    return f"m\x1f{unit}\x1f{position}"


def _mixed(own: bytes, beside: Sequence[bytes | None]) -> bytes:
    """A message's vector with its neighbours' at half weight, as signed bytes again."""
    import numpy as np

    from partner_memory.recall.embed import pack, unit_rows

    width = len(own)
    rows = [np.frombuffer(own, dtype=np.int8)] + [
        np.frombuffer(v, dtype=np.int8) for v in beside if v is not None and len(v) == width
    ]
    normed = unit_rows(np.stack(rows).astype(np.float32))
    total = normed[0] + 0.5 * normed[1:].sum(axis=0)
    return pack(total.reshape(1, -1))[0]


def _time_range(since: int | None, until: int | None) -> tantivy.Query:
    return tantivy.Query.range_query(
        SCHEMA,
        "time",
        tantivy.FieldType.Integer,
        _NO_TIME + 1 if since is None else since,
        until,
        include_upper=until is None,
    )


def _nothing() -> tantivy.Query:
    return tantivy.Query.empty_query()


def _scaled(cosine: np.ndarray) -> np.ndarray:
    """Cosines from 0 (the least) up, over their spread or `MEANING_SPREAD` if that is
    wider: at most 1."""
    spread = max(float(cosine.max() - cosine.min()), MEANING_SPREAD)
    scaled: np.ndarray = (cosine - cosine.min()) / spread
    return scaled


def _unit(vector: np.ndarray) -> np.ndarray:
    """The question's vector at length 1, as the rows it is compared with."""
    import numpy as np

    from partner_memory.recall.embed import unit_rows

    result: np.ndarray = unit_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
    return result


def _bm25(tf: float, length: float, average: float, documents: int, df: int) -> float:
    """tantivy's BM25, for the window's messages (scored with the index's statistics)."""
    idf = math.log(1 + (documents - df + 0.5) / (df + 0.5))
    return idf * (1 + K1) * tf / (tf + K1 * (1 - B + B * length / (average or 1.0)))


def _window_candidates(
    search: Search,
    words: list[str],
    state: IndexState,
    searcher: tantivy.Searcher,
    scoring: Scoring,
) -> _Pool:
    """The window's messages that hold a query word (or sit beside one), scored as the
    index would score them if they were stored."""
    docs = sorted(search.window, key=lambda d: d.position)
    if search.within is not None:
        docs = []
    reach = scoring.neighbours
    texts: list[list[str]] = []
    for i, doc in enumerate(docs):
        text = [*doc.terms] * (OWN_REPEAT if reach else 1)
        for other in [*docs[max(0, i - reach) : i], *docs[i + 1 : i + 1 + reach]]:
            text.extend(other.terms)
        texts.append(text)
    documents = searcher.num_docs + len(docs)
    average = (state.tokens + sum(len(t) for t in texts)) / max(1, documents)
    df = {w: searcher.doc_freq("text", w) + sum(1 for t in texts if w in t) for w in words}
    score: list[float] = []
    time: list[float | None] = []
    speaker: list[float | None] = []
    place: list[Place | None] = []
    near: list[bytes | None] = []
    for i, (doc, text) in enumerate(zip(docs, texts, strict=True)):
        if not search.admits(doc):
            continue
        value = sum(
            _bm25(text.count(w), len(text), average, documents, df[w]) for w in words if w in text
        )
        if value <= 0:
            continue
        score.append(value)
        time.append(doc.timestamp)
        speaker.append(_speaker_number(doc.speaker))
        place.append((None, doc.position))
        near.append(_window_vector(docs, i, reach))
    return _Pool.of(
        score=score,
        block=[_WINDOW_BLOCK] * len(score),
        time=time,
        speaker=speaker,
        vecno=[None] * len(score),
        address=[None] * len(score),
        place=place,
        near=near,
    )


def _window_by_meaning(
    search: Search, found: set[Place], vector: np.ndarray, floor: float
) -> _Pool:
    """The window's messages nearest the question that its words did not find, meaning
    it more than `floor`."""
    import numpy as np

    from partner_memory.recall.embed import unit_rows

    docs = sorted(search.window, key=lambda d: d.position)
    if search.within is not None or not docs:
        return _Pool.empty()
    width = len(vector)
    chosen: list[tuple[int, bytes]] = []
    for i, doc in enumerate(docs):
        if (None, doc.position) in found or doc.vector is None or len(doc.vector) != width:
            continue
        if not search.admits(doc):
            continue
        chosen.append((i, doc.vector))  # alone, as the stored ones are compared
    if not chosen:
        return _Pool.empty()
    matrix = unit_rows(
        np.stack([np.frombuffer(n, dtype=np.int8) for _, n in chosen]).astype(np.float32)
    )
    query = _unit(vector)
    cosine = matrix @ query
    nearest = [j for j in np.argsort(-cosine, kind="stable") if cosine[j] > floor]
    picked = [chosen[int(j)] for j in nearest[:MEANING_CANDIDATES]]
    return _Pool.of(
        score=[0.0] * len(picked),
        block=[_WINDOW_BLOCK] * len(picked),
        time=[docs[i].timestamp for i, _ in picked],
        speaker=[_speaker_number(docs[i].speaker) for i, _ in picked],
        vecno=[None] * len(picked),
        address=[None] * len(picked),
        place=[(None, docs[i].position) for i, _ in picked],
        near=[n for _, n in picked],
    )


def _window_vector(docs: Sequence[Doc], i: int, reach: int) -> bytes | None:
    own = docs[i].vector
    if own is None:
        return None
    beside = [d.vector for d in [*docs[max(0, i - reach) : i], *docs[i + 1 : i + 1 + reach]]]
    return _mixed(own, beside)


def _window_block_score(
    search: Search, words: list[str], state: IndexState, searcher: tantivy.Searcher
) -> float:
    """The window as one block: its score among the stored blocks."""
    if not search.window:
        return 0.0
    held = [t for d in search.window for t in d.terms]
    documents = searcher.num_docs + 1
    average = (state.block_tokens + len(held)) / documents
    return sum(
        _bm25(held.count(w), len(held), average, documents, searcher.doc_freq("text", w) + 1)
        for w in words
        if w in held
    )
