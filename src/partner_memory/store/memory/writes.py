"""What a durable consumer stages, written into the in-memory store's namespace state."""

from __future__ import annotations

import json
from collections.abc import Sequence

from partner_memory.model import LogEntry
from partner_memory.store.contract import staged
from partner_memory.store.contract.capabilities import RecallRow, StoredRecord, TopicSlice
from partner_memory.store.contract.staged import FiledTopics, IndexedMessages, Record, Unrecord
from partner_memory.store.memory.state import NamespaceState


def apply_staged(
    state: NamespaceState, consumer: str, entry: LogEntry, writes: Sequence[staged.Staged]
) -> None:
    """Write one rolling's staged writes for `consumer` (inside `advance_consumer`)."""
    for write in writes:
        if isinstance(write, Record):
            value = json.loads(write.encoded())  # stored as JSON: read back as JSON gives it
            state.records[consumer, write.key] = StoredRecord(
                write.key, value, write.unit, write.slice, write.message
            )
        elif isinstance(write, Unrecord):
            state.records.pop((consumer, write.key), None)
        elif entry.unit.id not in state.units:  # forgotten since it was logged
            continue
        elif isinstance(write, IndexedMessages):
            _index(state, entry, write)
        elif isinstance(write, FiledTopics):
            slice_ = entry.slice
            for path in dict.fromkeys(write.paths):
                key = (entry.unit.id, slice_.id, path)
                state.topics.setdefault(
                    key,
                    TopicSlice(
                        entry.unit.id, slice_.id, slice_.start_index, slice_.end_index, path
                    ),
                )


def _index(state: NamespaceState, entry: LogEntry, write: IndexedMessages) -> None:
    staged.check_rows(write, entry)
    if state.recall_embedder is None:  # the namespace's first rows: its vectors are these
        state.recall_embedder = write.embedder
    vectors = staged.keeps_vectors(entry.namespace, state.recall_embedder, write.embedder)
    first = entry.slice.start_index
    for offset, (message, (speaker, terms, vector)) in enumerate(
        zip(entry.messages, write.rows, strict=True)
    ):
        key = (entry.unit.id, first + offset)
        state.recall.setdefault(
            key,
            RecallRow(
                entry.unit.id,
                first + offset,
                entry.seq,
                speaker,
                message.timestamp,
                terms,
                vector if vectors else None,
            ),
        )
