"""Recall for a process: one in-memory index per namespace searched, never stale.

Before each search the index is brought up to the database: the rows the
"recall" consumer has written since (in log order), then the rollings it has
not indexed yet, read from the log itself, then the window, added for this
search only. So everything recorded before a search is found by it, in any
process, whether or not the indexer has caught up - and a read-only store
can be searched too. A reindex bumps the namespace's generation, and a held
index of an older generation is rebuilt.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import cast

from partner_memory.errors import InvalidInputError
from partner_memory.model import MemorySlice, Message, check_text
from partner_memory.recall.analyze import message_terms, terms
from partner_memory.recall.index import Doc, Hit, RecallIndex
from partner_memory.recall.indexer import RECALL_CONSUMER
from partner_memory.recall.results import RecalledMessage, RecalledSlice, RecallResult
from partner_memory.store.base import MemoryStore

#: Most hits one recall returns.
MAX_K = 100
#: Namespaces whose index a process keeps in memory (least recently searched go first).
HELD_INDEXES = 32
#: The window's messages form a unit of their own while a search runs.
_WINDOW = ("window",)


@dataclass
class _Held:
    generation: int
    index: RecallIndex = field(default_factory=RecallIndex)
    #: Everything up to this log sequence number is in `index` (-1: nothing yet).
    loaded: int = -1
    lock: threading.Lock = field(default_factory=threading.Lock)


class RecallEngine:
    def __init__(self, store: MemoryStore, *, capacity: int = HELD_INDEXES) -> None:
        self._store = store
        self._capacity = capacity
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._lock = threading.Lock()

    def recall(
        self,
        namespace: str,
        query: str,
        *,
        k: int = 10,
        since: int | None = None,
        until: int | None = None,
    ) -> RecallResult:
        check_text(query, "query")
        if not query.strip():
            raise InvalidInputError("query must not be empty")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise InvalidInputError(f"k must be an integer between 1 and {MAX_K}, got {k!r}")
        index = self._current(namespace)
        window = self._store.load_trajectory(namespace).messages
        with index.including([self._doc(None, _WINDOW, i, m) for i, m in enumerate(window)]):
            hits = index.search(
                terms(query), k=k, speaker=index.named_speaker(query), since=since, until=until
            )
        return self._resolve(namespace, query, hits, window)

    def _current(self, namespace: str) -> RecallIndex:
        state = self._store.recall_state(namespace, RECALL_CONSUMER)
        with self._lock:
            held = self._held.get(namespace)
            if held is None or held.generation != state.generation:
                held = self._held[namespace] = _Held(state.generation)
            self._held.move_to_end(namespace)
            while len(self._held) > self._capacity:
                self._held.popitem(last=False)
        with held.lock:
            if held.loaded < state.indexed:
                rows = self._store.recall_rows(namespace, held.loaded, state.indexed)
                held.index.add(
                    [
                        Doc(
                            (r.unit_id, r.position),
                            r.unit_id,
                            r.position,
                            r.terms.split(),
                            r.speaker,
                            r.timestamp,
                        )
                        for r in rows
                    ]
                )
                held.loaded = state.indexed
            while held.loaded < state.head:  # rollings the indexer has not reached yet
                entries = self._store.read_log(namespace, held.loaded, limit=100)
                if not entries:
                    break
                for entry in entries:
                    first = entry.slice.start_index
                    held.index.add(
                        [
                            self._doc(entry.unit.id, entry.unit.id, first + i, m)
                            for i, m in enumerate(entry.messages)
                        ]
                    )
                    held.loaded = entry.seq
        return held.index

    @staticmethod
    def _doc(unit_id: str | None, unit: Hashable, position: int, message: Message) -> Doc:
        speaker, words = message_terms(message)
        return Doc((unit_id, position), unit, position, words, speaker, message.timestamp)

    def _resolve(
        self, namespace: str, query: str, hits: list[Hit], window: list[Message]
    ) -> RecallResult:
        found: list[RecalledMessage] = []
        slices: dict[tuple[str, str], RecalledSlice] = {}
        places = [cast(tuple[str | None, int], hit.key) for hit in hits]
        wanted: dict[str, list[int]] = {}
        for unit_id, position in places:
            if unit_id is not None:
                wanted.setdefault(unit_id, []).append(position)
        stored: dict[tuple[str, int], Message] = {}
        unit_slices: dict[str, list[MemorySlice]] = {}
        ranges = [(u, min(p), max(p) + 1) for u, p in wanted.items()]
        excerpts = self._store.read_excerpts(namespace, ranges)  # one transaction
        for (unit_id, first, _), (rows, held) in zip(ranges, excerpts, strict=True):
            stored.update(((unit_id, first + i), m) for i, m in enumerate(rows))
            unit_slices[unit_id] = held
        for hit, (unit_id, position) in zip(hits, places, strict=True):
            if unit_id is None:
                found.append(RecalledMessage(window[position], None, None, hit.score))
                continue
            message = stored.get((unit_id, position))
            if message is None or not message.content:  # forgotten meanwhile
                continue
            found.append(RecalledMessage(message, unit_id, position, hit.score))
            for memory_slice in unit_slices[unit_id]:
                if memory_slice.start_index <= position < memory_slice.end_index:
                    slices.setdefault(
                        (unit_id, memory_slice.id), RecalledSlice(unit_id, memory_slice)
                    )
        return RecallResult(query, found, list(slices.values()))
