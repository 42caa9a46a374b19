"""One namespace's recall index on disk: its documents, its state, its parts.

A message is a document read with its neighbours: its `text` holds its own
terms `OWN_REPEAT` times and the terms of the `NEIGHBOURS` messages on each
side of it in its memory session once (a new rolling rewrites the last
messages before it, whose neighbours it brings). A block of `BLOCK`
consecutive messages of a unit is a document of a second index (its own
statistics), which gives the session score (`recall.ranking`).

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tantivy

from partner_memory.recall.searcher import Place

#: Neighbours on each side read with a message; a message's own terms count this many
#: times beside each neighbour's once (neighbours at half weight). Re-decided on both
#: benchmarks (R@10, before `OWN_SHARE`): 0, 1, 2 neighbours gave LoCoMo dev 70.3, 79.6,
#: 81.1 (2 best in every conversation) and BEAM 42.7, 42.0, 37.3; 2 kept, with
#: `OWN_SHARE` for BEAM's short messages between long replies.
NEIGHBOURS, OWN_REPEAT = 2, 2


def read_with_neighbours(
    own: Sequence[str], beside: Sequence[Sequence[str]], reach: int
) -> list[str]:
    """A message's document text: its own terms `OWN_REPEAT` times (once if it is read
    alone, `reach` 0), or as many more times as keeps them `OWN_SHARE` of the text,
    then its neighbours' terms once: a short message between long replies is not
    drowned by them, and short turns read as before."""
    if not reach:
        return list(own)
    near = sum(len(other) for other in beside)
    repeat = OWN_REPEAT
    if own:
        repeat = max(OWN_REPEAT, math.ceil(OWN_SHARE * near / ((1 - OWN_SHARE) * len(own))))
    text = [*own] * repeat
    for other in beside:
        text.extend(other)
    return text


#: The least share of a document its own terms make up: the share a turn read with two
#: like-sized turns on each side has (2 / (2 + 4)), kept for any lengths. Not fitted:
#: BEAM (short user messages between ~3,800-character replies) R@10 37.3 -> 40.5, LoCoMo
#: dev 81.1 -> 81.0 (per conversation -0.7 to +0.4); a half measured no better on either.
OWN_SHARE = 1 / 3


#: Messages per block document (the session score of a long unit stays local).
BLOCK = 256
#: Memory a writer may fill before it writes a segment: tantivy's least for a rolling's
#: few messages, more for a rebuild (fewer, larger segments).
WRITER_HEAP, REBUILD_HEAP = 15_000_000, 64_000_000

#: The documents' layout: an index of another layout is never opened (it is rebuilt).
INDEX_FORMAT = 7

MESSAGE_KIND, BLOCK_KIND, STATE_KIND = 0, 1, 2
STATE_KEY = "state"
#: The time of a message that has none (first in time order).
NO_TIME = -(2**63)
#: The window's messages are a block of their own.
WINDOW_BLOCK = 0


def hash_number(text: str) -> int:
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
    builder.add_integer_field("asks", stored=True, fast=True)  # 1: it only asks
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


class IndexPart:
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
        found = searcher.search(tantivy.Query.term_query(self.schema, "key", STATE_KEY), 1).hits
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
        writer.delete_documents_by_term("key", STATE_KEY)
        writer.add_document(
            tantivy.Document.from_dict(
                {"kind": STATE_KIND, "key": STATE_KEY, "meta": json.dumps(state).encode()},
                self.schema,
            )
        )


def place_of(stored: tantivy.Document) -> Place:
    return (str(stored.get_first("unit")), int(stored.get_first("pos") or 0))


def speaker_number(speaker: str | None) -> int | None:
    return hash_number(speaker.lower()) if speaker else None


def block_id(unit: str, block: int) -> int:
    return hash_number(f"{unit}\x1f{block}") or 1  # never the window's


def any_of(schema: tantivy.Schema, words: list[str]) -> tantivy.Query:
    should = tantivy.Occur.Should
    return tantivy.Query.boolean_query(
        [(should, tantivy.Query.term_query(schema, "text", w)) for w in words]
    )


def positions(unit: str, start: int, end: int) -> tantivy.Query:
    must = tantivy.Occur.Must
    return tantivy.Query.boolean_query(
        [
            (must, tantivy.Query.term_query(SCHEMA, "unitno", hash_number(unit))),
            (
                must,
                tantivy.Query.range_query(
                    SCHEMA, "pos", tantivy.FieldType.Integer, start, end, include_upper=False
                ),
            ),
        ]
    )


def message_key(unit: str, position: int) -> str:
    return f"m\x1f{unit}\x1f{position}"


def time_range(since: int | None, until: int | None) -> tantivy.Query:
    return tantivy.Query.range_query(
        SCHEMA,
        "time",
        tantivy.FieldType.Integer,
        NO_TIME + 1 if since is None else since,
        until,
        include_upper=until is None,
    )


def nothing() -> tantivy.Query:
    return tantivy.Query.empty_query()
