"""The in-memory store's optional capabilities: keys, topics, recall rows, forgetting,
dumps and the inspector's figures, with the SQL backends' semantics."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from fnmatch import fnmatchcase

from partner_memory.errors import ConflictError, NotFoundError
from partner_memory.model import (
    TOPIC_SEPARATOR,
    Message,
    NamespaceOverview,
    RollingRecord,
    RollingTotals,
    check_page,
    newest,
)
from partner_memory.store.contract.capabilities import (
    Located,
    MessagesForget,
    NamespaceDump,
    NamespaceQuery,
    RecallAnalyzer,
    RecallRow,
    RecallState,
    RecordQuery,
    Resummary,
    StoredItem,
    StoredKey,
    StoredRecord,
    StoreHealth,
    TopicSlice,
    asks,
)
from partner_memory.store.contract.derived import summed
from partner_memory.store.contract.refusals import none_found
from partner_memory.store.contract.rows import message_from_row, message_params, slice_from_row
from partner_memory.store.memory.items import forget_items
from partner_memory.store.memory.state import (
    ConsumerRow,
    MemoryBase,
    NamespaceState,
    RollingRow,
    SharedMemory,
    UnitState,
    WindowRow,
    bigint,
    now_ms,
)

#: What a forgotten message's metadata says instead of what it said.
FORGOTTEN = {"forgotten": True}


class ExtrasMixin(MemoryBase):
    """Every optional capability of `InMemoryStore`."""

    def read_records(self, namespace: str, query: RecordQuery) -> list[StoredRecord]:
        bigint(query.limit, "limit")
        after = query.after
        with self._reading() as shared:
            state = self._state(shared, namespace)
            keys = sorted(
                k
                for c, k in state.records
                if c == query.consumer
                and k.startswith(query.prefix)
                and (after is None or k > after)
            )
            return [state.records[query.consumer, k] for k in keys[: query.limit]]

    # A forgotten unit's rollings leave the log, so the head is kept, not derived.
    def log_head(self, namespace: str) -> int:
        with self._reading() as shared:
            found = shared.namespaces.get(namespace)
            return 0 if found is None else found.rolling_seq

    # -- keys --------------------------------------------------------------------------

    def add_api_key(self, key: StoredKey) -> None:
        with self._writing() as shared:
            if any(k.key_id == key.key_id for k in shared.keys):
                raise ConflictError(f"key {key.key_id!r} already exists")
            shared.keys.append(key)

    def api_keys(self) -> list[StoredKey]:
        with self._reading() as shared:
            return list(shared.keys)

    def find_api_key(self, key_id: str) -> StoredKey | None:
        with self._reading() as shared:
            return next((k for k in shared.keys if k.key_id == key_id), None)

    def revoke_api_key(self, key_id: str, *, at: int) -> bool:
        with self._writing() as shared:
            for i, key in enumerate(shared.keys):
                if key.key_id == key_id:
                    if key.revoked_at is None:
                        shared.keys[i] = key._replace(revoked_at=at)
                    return True
        return False

    # -- topics ------------------------------------------------------------------------

    def topic_paths(self, namespace: str, *, limit: int = 100) -> list[tuple[str, int]]:
        with self._reading() as shared:
            counted = Counter(t.path for t in self._state(shared, namespace).topics.values())
        return sorted(counted.items(), key=lambda pc: (-pc[1], pc[0]))[:limit]

    def topic_slices(self, namespace: str, path: str) -> list[TopicSlice]:
        below = path + TOPIC_SEPARATOR
        with self._reading() as shared:
            state = self._state(shared, namespace)
            found = [t for t in state.topics.values() if t.path == path or t.path.startswith(below)]
            return sorted(
                found, key=lambda t: (state.units[t.unit_id].order, t.start_index, t.path)
            )

    # -- recall rows ---------------------------------------------------------------------

    def recall_state(self, namespace: str, consumer: str) -> RecallState:
        with self._reading() as shared:
            state = self._state(shared, namespace)
            row = state.consumers.get(consumer)
            indexed = 0 if row is None else row.position
            return RecallState(
                state.recall_generation, indexed, state.rolling_seq, state.recall_embedder
            )

    def recall_rows(
        self, namespace: str, after: int, through: int, *, offset: int = 0, limit: int | None = None
    ) -> list[RecallRow]:
        check_page(offset, limit)
        with self._reading() as shared:
            state = self._state(shared, namespace)
            rows = [r for r in state.recall.values() if after < r.seq <= through]
            rows.sort(key=lambda r: (r.seq, state.units[r.unit_id].order, r.position))
            page = rows[offset:] if limit is None else rows[offset : offset + limit]
            return [_with_message(r, state.units[r.unit_id].messages[r.position]) for r in page]

    def reindex_recall(self, namespace: str, consumer: str, analysis: RecallAnalyzer) -> int:
        with self._changing(namespace) as state:
            state.recall = {}
            for unit in sorted(state.units.values(), key=lambda u: u.order):
                analysed = analysis.rows(unit.messages)
                for position, (m, (speaker, terms, vector)) in enumerate(
                    zip(unit.messages, analysed, strict=True)
                ):
                    state.recall[unit.id, position] = RecallRow(
                        unit.id, position, 0, speaker, m.timestamp, terms, vector
                    )
            row = state.consumers.get(consumer) or ConsumerRow(consumer)
            state.consumers[consumer] = replace(row, position=state.rolling_seq, durable=True)
            state.recall_generation += 1
            state.recall_embedder = analysis.embedder_name
            return len(state.recall)

    # -- forgetting ----------------------------------------------------------------------

    def locate_messages(self, namespace: str, message_ids: Sequence[str]) -> list[Located]:
        with self._reading() as shared:
            state = self._state(shared, namespace)
            found = [i for i in dict.fromkeys(message_ids) if i in state.located]
            return [Located(i, *state.located[i]) for i in found]

    def forget_messages(self, namespace: str, forget: MessagesForget) -> int:
        message_ids, resummaries, at = forget
        asked = set(message_ids)
        with self._writing() as shared, self._changing(namespace) as state:
            stored = [(i, state.located[i]) for i in asked if i in state.located]
            found = {i for i, _ in stored} | (asked & state.window_ids())
            if not found:
                raise none_found(message_ids, namespace)
            for _, (unit_id, position) in stored:
                unit = state.writable(unit_id)
                held = unit.messages[position]
                unit.messages[position] = Message(
                    held.role, "", id=held.id, timestamp=held.timestamp, metadata=dict(FORGOTTEN)
                )
                state.recall.pop((unit_id, position), None)
            state.window = [r for r in state.window if r.message.id not in asked]
            for change in resummaries:
                _resummarise(state, change)
            quoting = state.activation
            if quoting and quoting.quotes(messages=asked, slices={c.slice_id for c in resummaries}):
                state.activation = None
            _forget_records(state, asked, resummaries, {u for _, (u, _) in stored})
            forget_items(shared, namespace, asked)
            state.recall_generation += 1
            shared.forgets += [(namespace, "message", i, at) for i in message_ids]
            return len(found)

    def forget_unit(self, namespace: str, unit_id: str, *, at: int) -> None:
        with self._writing() as shared, self._changing(namespace) as state:
            unit = state.units.pop(unit_id, None)
            if unit is None:
                raise NotFoundError(f"unit {unit_id!r} not found in namespace {namespace!r}")
            ids = {m.id for m in unit.messages}
            forget_items(shared, namespace, ids)
            for message_id in ids:
                state.located.pop(message_id, None)
            state.recall = {k: r for k, r in state.recall.items() if k[0] != unit_id}
            state.topics = {k: t for k, t in state.topics.items() if k[0] != unit_id}
            state.rollings = [r for r in state.rollings if r.unit_id != unit_id]
            state.records = {
                k: r
                for k, r in state.records.items()
                if r.unit != unit_id and (r.message is None or r.message not in ids)
            }
            if state.activation and state.activation.quotes(units={unit_id}):
                state.activation = None
            state.recall_generation += 1
            shared.forgets.append((namespace, "unit", unit_id, at))

    def forget_namespace(self, namespace: str, *, at: int) -> None:
        with self._writing() as shared:
            self._state(shared, namespace)
            del shared.namespaces[namespace]
            forget_items(shared, namespace, None)
            shared.forgets.append((namespace, "namespace", namespace, at))

    def forget_log(self, namespace: str, *, limit: int = 100) -> list[tuple[str, str, int]]:
        bigint(limit, "limit")
        with self._reading() as shared:
            mine = [(k, t, a) for n, k, t, a in shared.forgets if n == namespace]
        return mine[::-1][:limit]

    def forgotten_messages(self, namespace: str, message_ids: Sequence[str]) -> set[str]:
        asked = set(message_ids)
        with self._reading() as shared:
            return {t for n, k, t, _ in shared.forgets if n == namespace and k == "message"} & asked

    def purge(self) -> list[str]:
        """Nothing to rewrite: what a forget deletes is gone from memory at once."""
        with self._writing():
            return []

    # -- dumps ---------------------------------------------------------------------------

    def export_namespace(self, namespace: str) -> NamespaceDump:
        with self._reading() as shared:
            state = self._state(shared, namespace)
            return NamespaceDump(
                name=state.name,
                memory_session_id=state.session_id,
                rolling_seq=state.rolling_seq,
                units=state.unit_rows(),
                messages=state.message_rows(),
                slices=state.slice_rows(),
                window=state.window_rows(),
                activity=state.activity,
                rollings=[r.as_tuple() for r in state.rollings],
                consumers=[c.as_tuple() for c in sorted(state.consumers.values(), key=_name)],
                records=[
                    (c, r.key, json.dumps(r.value, ensure_ascii=False), r.unit, r.slice, r.message)
                    for (c, _), r in sorted(state.records.items())
                ],
                items=[i[1:] for (n, _), i in sorted(shared.items.items()) if n == namespace],
            )

    def import_namespace(self, dump: NamespaceDump) -> None:
        with self._writing() as shared:
            if dump.name in shared.namespaces or any(n == dump.name for n, _ in shared.items):
                raise ConflictError(
                    f"namespace {dump.name!r} already exists in {self.url}; nothing copied"
                )
            shared.namespaces[dump.name] = _restored(shared, dump)
            for row in dump.items:
                shared.items[dump.name, str(row[0])] = StoredItem(dump.name, *row)

    # -- inspection ----------------------------------------------------------------------

    def namespace_overviews(self, query: NamespaceQuery) -> list[NamespaceOverview]:
        matching, after, search = query.matching, query.after, (query.search or "").lower()
        with self._reading() as shared:
            names = sorted(
                n
                for n in shared.namespaces
                if (matching is None or fnmatchcase(n, matching))
                and (after is None or n > after)
                and search in n.lower()
            )
            return [_overview(shared.namespaces[n]) for n in names[: query.limit]]

    def rolling_history(
        self, namespace: str, *, limit: int, before: int | None = None
    ) -> list[RollingRecord]:
        with self._reading() as shared:
            rows = self._state(shared, namespace).rollings
            shown = [r for r in reversed(rows) if before is None or r.seq < before][:limit]
        return [
            RollingRecord(r.seq, r.started_at, r.idle, r.unit_id, r.slice_id, r.messages, r.cost)
            for r in shown
        ]

    def rolling_totals(self, namespace: str) -> RollingTotals:
        with self._reading() as shared:
            rows = list(self._state(shared, namespace).rollings)
        return summed([r.cost for r in rows], sum(r.messages for r in rows))

    def store_health(self) -> StoreHealth:
        now = now_ms()
        with self._reading() as shared:
            states = list(shared.namespaces.values())
        windows = [len(s.window) for s in states]
        leases = [s.lease[1] for s in states if s.lease is not None]
        names = sorted({c.name for s in states for c in s.consumers.values() if c.durable})
        lag: dict[str, tuple[int, int]] = {}
        for name in names:
            behind = [s.rolling_seq - _position(s, name) for s in states]
            lag[name] = (sum(behind), sum(1 for b in behind if b > 0))
        return StoreHealth(
            namespaces=len(states),
            window_messages=sum(windows),
            longest_window=max(windows, default=0),
            leases_held=sum(1 for expiry in leases if expiry >= now),
            leases_expired=sum(1 for expiry in leases if expiry < now),
            consumer_lag=lag,
        )


def _name(row: ConsumerRow) -> str:
    return row.name


def _resummarise(state: NamespaceState, change: Resummary) -> None:
    if change.unit_id not in state.units:
        return
    unit = state.writable(change.unit_id)
    unit.slices = [
        (order, replace(s, summary=change.summary, summarizer=change.summarizer))
        if s.id == change.slice_id
        else (order, s)
        for order, s in unit.slices
    ]
    state.topics = {  # its topics were drawn from what is now forgotten: they go too
        k: t for k, t in state.topics.items() if (k[0], k[1]) != (change.unit_id, change.slice_id)
    }


def _forget_records(
    state: NamespaceState, messages: set[str], slices: Sequence[Resummary], units: set[str]
) -> None:
    """A record drawn from a forgotten message goes; else one of a slice that held one;
    else one of a unit that held one (the most precise key the record names)."""
    held = {(c.unit_id, c.slice_id) for c in slices}

    def drawn(r: StoredRecord) -> bool:
        if r.message is not None:
            return r.message in messages
        if r.slice is not None:
            return (r.unit, r.slice) in held
        return r.unit is not None and r.unit in units

    state.records = {k: r for k, r in state.records.items() if not drawn(r)}


def _overview(state: NamespaceState) -> NamespaceOverview:
    units = state.units.values()
    last = [newest(r.interaction for r in state.window), newest(u.timestamp for u in units)]
    return NamespaceOverview(
        name=state.name,
        unit_count=len(state.units),
        slice_count=sum(len(u.slices) for u in units),
        rolling_count=state.rolling_seq,
        message_count=sum(len(u.messages) for u in units),
        window_count=len(state.window),
        llm_tokens=sum(r.cost.prompt_tokens + r.cost.completion_tokens for r in state.rollings),
        last_activity=newest(last),
    )


def _restored(shared: SharedMemory, dump: NamespaceDump) -> NamespaceState:
    state = NamespaceState(dump.name, shared.next_order(), dump.memory_session_id)
    state.rolling_seq = dump.rolling_seq
    for unit_id, timestamp, _, _ in dump.units:
        state.units[unit_id] = UnitState(unit_id, shared.next_order(), timestamp)
    for row in dump.messages:  # unit id, position, then the message's columns
        message = message_from_row(row[2:])
        state.units[row[0]].messages.append(message)
        state.located[message.id] = (row[0], row[1])
    for row in dump.slices:  # unit id, then the slice's columns
        state.units[row[0]].slices.append((shared.next_order(), slice_from_row(row[1:])))
    state.window = [  # the message's columns, then whether structured and its interaction
        WindowRow(message_from_row(row[:5]), bool(row[5]), row[6]) for row in dump.window
    ]
    state.activity = None if dump.activity is None else (dump.activity[0], dump.activity[1])
    state.rollings = [RollingRow.from_tuple(r) for r in dump.rollings]
    state.consumers = {
        c[0]: ConsumerRow(c[0], bool(c[1]), c[2], c[3], c[4], c[5]) for c in dump.consumers
    }
    state.records = {
        (c, key): StoredRecord(key, json.loads(value), unit, slice_id, message)
        for c, key, value, unit, slice_id, message in dump.records
    }
    return state


def _with_message(row: RecallRow, message: Message) -> RecallRow:
    """The row with its message's role and metadata, as the SQL backends join them."""
    return row._replace(
        role=message.role, metadata=message_params(message)[4], asks=asks(message.content)
    )


def _position(state: NamespaceState, consumer: str) -> int:
    row = state.consumers.get(consumer)
    return 0 if row is None else row.position
