"""A replay group's rollings written in a few statements, not a dozen each.

Applied one by one, as a live rolling is, each rolling of a replay took
thirteen statements: the namespace row, the stored-ids check, the unit (and
its creation after an idle rolling), its messages, its slice, the unit's
header, three counters of the namespace, the log row, the new session and
the idle mark. A group is written under one lock, so here the namespace is
read once, the group's message ids are checked in one query, and the units,
messages, slices and log rows each go in one multi-row INSERT; the counters
move once. What is written is what applying the rollings in turn writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from partner_memory.model import MemorySlice, UnitInfo, UnitUpdate
from partner_memory.store.contract.base import CommittedRolling, RollingCommit
from partner_memory.store.contract.refusals import already_stored, refuse_repeated_ids
from partner_memory.store.contract.rows import COST_COLUMNS, cost_params
from partner_memory.store.sql.base import (
    MESSAGE_ROW_COLUMNS,
    SLICE_ROW_COLUMNS,
    Cursor,
    SqlBase,
    message_row,
    slice_row,
    values_clause,
)
from partner_memory.store.sql.window import chunks, mark_idle, remove_window, units_among

LOG_COLUMNS = (
    f"namespace_id, seq, unit_id, slice_id, started_at, idle, messages, {COST_COLUMNS},"
    " rolling_size, retain_divisor, unit_slices, holder"
)


@dataclass
class _Unit:
    """A unit as the group leaves it (`pk` None until a unit the group creates is in)."""

    unit_id: str
    pk: int | None
    message_count: int
    slice_count: int
    timestamp: int
    extended: bool = False


def write_rollings(
    sql: SqlBase,
    cur: Cursor,
    namespace: str,
    namespace_id: int,
    rollings: Sequence[tuple[RollingCommit, Sequence[str]]],
) -> list[CommittedRolling]:
    """Each (rolling, window rows it deletes) as if applied in turn, inside the caller's
    transaction, which holds the namespace's row lock and its rolling lease."""
    commits = [commit for commit, _ in rollings]
    _refuse_stored(sql, cur, namespace, namespace_id, commits)
    row = sql._run(
        cur, "SELECT memory_session_id, rolling_seq FROM namespaces WHERE id = ?", (namespace_id,)
    ).fetchone()
    first_session, seq = str(row[0]), int(row[1])
    units = _found_units(sql, cur, namespace_id, _sessions(commits, first_session))
    found = len(units)
    committed: list[CommittedRolling] = []
    slices: list[tuple[_Unit, MemorySlice]] = []
    logged: list[tuple[Any, ...]] = []
    session = first_session
    for commit in commits:
        if not commit.messages:
            committed.append(CommittedRolling(update=None, seq=None))
        else:
            unit = units.get(session)
            if unit is None:
                unit = units[session] = _Unit(session, None, 0, 0, commit.timestamp)
            made = MemorySlice(
                id=commit.slice_id,
                start_index=unit.message_count,
                end_index=unit.message_count + len(commit.messages),
                summary=commit.summary,
                timestamp=commit.timestamp,
                summarizer=commit.cost.summarizer,
            )
            unit.message_count, unit.slice_count = made.end_index, unit.slice_count + 1
            unit.timestamp, unit.extended = commit.timestamp, True
            seq += 1
            slices.append((unit, made))
            logged.append(log_row(namespace_id, seq, commit, session, unit.slice_count))
            info = UnitInfo(session, commit.timestamp, unit.message_count, unit.slice_count)
            committed.append(CommittedRolling(update=UnitUpdate(info, made), seq=seq))
        if commit.new_session_id is not None:
            session = commit.new_session_id
    everyone = list(units.values())
    created = everyone[found:]
    _insert_units(sql, cur, namespace_id, created)
    for unit in everyone[:found]:
        if unit.extended:
            sql._run(
                cur,
                "UPDATE units SET timestamp = ?, message_count = ?, slice_count = ?"
                " WHERE namespace_id = ? AND pk = ?",
                (unit.timestamp, unit.message_count, unit.slice_count, namespace_id, unit.pk),
            )
    _insert_contents(sql, cur, namespace_id, commits, slices)
    sql._insert_rows(cur, "rollings", LOG_COLUMNS, logged)
    remove_window(sql, cur, namespace_id, [i for _, drop in rollings for i in drop])
    if logged or created or session != first_session:
        sql._run(
            cur,
            "UPDATE namespaces SET rolling_seq = ?, unit_count = unit_count + ?,"
            " slice_count = slice_count + ?, memory_session_id = ? WHERE id = ?",
            (seq, len(created), len(slices), session, namespace_id),
        )
    quiet = [c.last_interaction for c in commits if c.idle and c.last_interaction is not None]
    if quiet:
        # marked in turn, the first mark inserts the row and the later ones only move
        # idle_rolled_for: one upsert of (first, last) leaves the same row
        mark_idle(sql, cur, namespace_id, quiet[0], rolled_for=quiet[-1])
    return committed


def _refuse_stored(
    sql: SqlBase, cur: Cursor, namespace: str, namespace_id: int, commits: list[RollingCommit]
) -> None:
    """The refusals of applying the rollings in turn: an id twice in one rolling, or
    already stored (by the namespace, or by an earlier rolling of the group)."""
    seen: set[str] = set()
    for commit in commits:
        ids = [m.id for m in commit.messages]
        refuse_repeated_ids(ids, "update")
        again = seen.intersection(ids)
        if again:
            raise already_stored(min(again), namespace)
        seen.update(ids)
    if not seen or _no_units(sql, cur, namespace_id):  # a new namespace stores nothing yet
        return
    stored = sql._stored_ids(cur, namespace_id, list(seen))
    for commit in commits:  # named as the first rolling holding one would name it
        held = stored.intersection(m.id for m in commit.messages)
        if held:
            raise already_stored(min(held), namespace)


def _no_units(sql: SqlBase, cur: Cursor, namespace_id: int) -> bool:
    row = sql._run(
        cur, "SELECT 1 FROM units WHERE namespace_id = ? LIMIT 1", (namespace_id,)
    ).fetchone()
    return row is None


def _sessions(commits: Sequence[RollingCommit], session: str) -> list[str]:
    """The memory sessions (unit ids) the rollings store their messages in."""
    targets: list[str] = []
    for commit in commits:
        if commit.messages and session not in targets:
            targets.append(session)
        if commit.new_session_id is not None:
            session = commit.new_session_id
    return targets


def _found_units(
    sql: SqlBase, cur: Cursor, namespace_id: int, unit_ids: list[str]
) -> dict[str, _Unit]:
    """The stored units among `unit_ids`, as they are now."""
    rows = units_among(
        sql, cur, namespace_id, unit_ids, "pk, message_count, slice_count, timestamp"
    )
    return {
        str(unit_id): _Unit(str(unit_id), int(pk), int(count), int(slices), int(timestamp))
        for unit_id, pk, count, slices, timestamp in rows
    }


def _insert_units(sql: SqlBase, cur: Cursor, namespace_id: int, created: list[_Unit]) -> None:
    """The units the group creates, with their final headers; their pks noted."""
    by_id = {unit.unit_id: unit for unit in created}
    for chunk in chunks(created, 100):
        params = [
            value
            for u in chunk
            for value in (namespace_id, u.unit_id, u.timestamp, u.message_count, u.slice_count)
        ]
        rows = sql._run(
            cur,
            "INSERT INTO units (namespace_id, unit_id, timestamp, message_count, slice_count)"
            f" VALUES {values_clause(len(chunk), 5)} RETURNING unit_id, pk",
            params,
        ).fetchall()
        for unit_id, pk in rows:
            by_id[str(unit_id)].pk = int(pk)


def _insert_contents(
    sql: SqlBase,
    cur: Cursor,
    namespace_id: int,
    commits: list[RollingCommit],
    slices: list[tuple[_Unit, MemorySlice]],
) -> None:
    """Every rolling's messages, then every slice."""
    messages: list[tuple[Any, ...]] = []
    stored = (c.messages for c in commits if c.messages)
    for (unit, made), increment in zip(slices, stored, strict=True):
        for position, message in enumerate(increment, start=made.start_index):
            messages.append(message_row(unit.pk, namespace_id, position, message))
    sql._insert_rows(cur, "messages", MESSAGE_ROW_COLUMNS, messages)
    rows = [slice_row(unit.pk, namespace_id, s) for unit, s in slices]
    sql._insert_rows(cur, "slices", SLICE_ROW_COLUMNS, rows)


def log_row(
    namespace_id: int, seq: int, commit: RollingCommit, unit_id: str, unit_slices: int
) -> tuple[Any, ...]:
    """A rolling's row in `rollings` (its log entry), as `LOG_COLUMNS` name them."""
    return (
        namespace_id,
        seq,
        unit_id,
        commit.slice_id,
        commit.timestamp,
        int(commit.idle),
        len(commit.messages),
        *cost_params(commit.cost),
        commit.rolling_size,
        commit.retain_divisor,
        unit_slices,
        commit.holder,
    )
