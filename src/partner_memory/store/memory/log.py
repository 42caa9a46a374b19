"""The in-memory store's rolling log: commits of rollings and replays, and its followers."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from partner_memory.errors import ConflictError
from partner_memory.model import ConsumerStatus, LogEntry, MemorySlice, UnitInfo
from partner_memory.store.contract.base import (
    CommittedRolling,
    FollowerPosition,
    ReplayStep,
    RollingCommit,
)
from partner_memory.store.contract.refusals import lease_lost
from partner_memory.store.contract.staged import StagedRollings, checked_rollings
from partner_memory.store.memory.state import (
    ConsumerRow,
    MemoryBase,
    NamespaceState,
    RollingRow,
    WindowRow,
    mark_idle,
    release,
)
from partner_memory.store.memory.writes import apply_staged


class LogMixin(MemoryBase):
    """`LogStore` of `InMemoryStore`."""

    # -- the rolling log ---------------------------------------------------------------

    def _leased(self, state: NamespaceState, holder: str) -> None:
        if state.lease is None or state.lease[0] != holder:
            raise lease_lost(state.name)

    def _apply_rolling(
        self, state: NamespaceState, commit: RollingCommit, drop: Collection[str]
    ) -> CommittedRolling:
        update, seq = None, None
        if commit.messages:
            template = MemorySlice(
                commit.slice_id, 0, 0, commit.summary, commit.timestamp, commit.cost.summarizer
            )
            update = self.append_slice(state, commit.messages, template)
            state.rolling_seq += 1
            seq = state.rolling_seq
            unit, made = update.unit, update.slice
            row = (seq, unit.id, made.id, commit.timestamp, commit.idle, len(commit.messages))
            shape = (commit.rolling_size, commit.retain_divisor, unit.slice_count, commit.holder)
            state.rollings.append(RollingRow(*row, commit.cost, *shape))
        gone = set(drop)
        state.window = [r for r in state.window if r.message.id not in gone]
        if commit.new_session_id is not None:
            state.session_id = commit.new_session_id
        if commit.idle and commit.last_interaction is not None:
            mark_idle(state, commit.last_interaction)
        return CommittedRolling(update=update, seq=seq)

    def commit_replay(
        self, namespace: str, holder: str, steps: Sequence[ReplayStep]
    ) -> list[CommittedRolling]:
        recorded = {m.id for step in steps for m in step.messages}
        dropped = {i for step in steps if step.rolling for i in step.rolling.drop}
        committed: list[CommittedRolling] = []
        with self._changing(namespace) as state:
            self._leased(state, holder)
            for step in steps:
                if step.rolling is None:
                    continue
                if step.rolling.holder != holder:
                    raise ConflictError("a replay commits rollings of its own lease only")
                older = [i for i in step.rolling.drop if i not in recorded]
                committed.append(self._apply_rolling(state, step.rolling, older))
            held = state.window_ids()
            for step in steps:
                times = step.interactions or [step.interaction] * len(step.messages)
                for message, at in zip(step.messages, times, strict=True):
                    if message.id in dropped:
                        continue
                    if message.id in held:
                        raise ConflictError(f"message id {message.id!r} is already in the window")
                    held.add(message.id)
                    state.window.append(WindowRow(message, message.id in step.structured, at))
            release(state, holder)
        return committed

    def read_log(self, namespace: str, after: int, *, limit: int = 100) -> list[LogEntry]:
        with self._reading() as shared:
            return _log(self._state(shared, namespace), after, limit)

    def consumer_position(self, consumer: str, namespace: str) -> FollowerPosition:
        with self._reading() as shared:
            state = self._state(shared, namespace)
            row = state.consumers.get(consumer)
            return FollowerPosition(0 if row is None else row.position, state.recall_generation)

    def advance_consumer(
        self, consumer: str, namespace: str, expected: FollowerPosition, staged: StagedRollings
    ) -> None:
        if not (writes := checked_rollings(staged, consumer, self)):
            return
        with self._changing(namespace) as state:
            row = state.consumers.get(consumer) or ConsumerRow(consumer)
            now = FollowerPosition(row.position, state.recall_generation)
            if now != expected:
                raise ConflictError(
                    f"consumer {consumer!r} on {namespace!r} is at {tuple(now)}, not"
                    f" {tuple(expected)}: read the log again"
                )
            for entry, done in writes:
                apply_staged(state, consumer, entry, done)
            state.consumers[consumer] = replace(row, position=staged[-1][0].seq, durable=True)

    def record_consumer_failure(
        self, consumer: str, namespace: str, *, durable: bool, error: str, at: int
    ) -> None:
        with self._changing(namespace) as state:
            row = state.consumers.get(consumer)
            if row is None:
                row = ConsumerRow(consumer, durable=durable)
            state.consumers[consumer] = replace(
                row, failures=row.failures + 1, last_error=error, last_failure_at=at
            )

    def consumer_status(self, namespace: str) -> list[ConsumerStatus]:
        with self._reading() as shared:
            found = shared.namespaces.get(namespace)
            if found is None:
                return []
            return [
                c.status(found.rolling_seq)
                for c in sorted(found.consumers.values(), key=lambda c: c.name)
            ]


def _log(state: NamespaceState, after: int, limit: int) -> list[LogEntry]:
    entries: list[LogEntry] = []
    for row in state.rollings:
        if row.seq <= after:
            continue
        if len(entries) == limit:
            break
        unit = state.units.get(row.unit_id)
        if unit is None:
            continue
        found = next((s for _, s in unit.slices if s.id == row.slice_id), None)
        if found is None:
            continue
        entries.append(
            LogEntry(
                namespace=state.name,
                seq=row.seq,
                unit=UnitInfo(unit.id, found.timestamp, found.end_index, row.unit_slices),
                slice=found,
                messages=tuple(unit.messages[found.start_index : found.end_index]),
                idle=row.idle,
                rolling_size=row.rolling_size,
                retain_divisor=row.retain_divisor,
                cost=row.cost,
            )
        )
    return entries
