"""Import a reference state directory into a namespace: all or nothing, idempotent.

The plan is computed against what the store holds, then written in one
transaction: new units are created, units the store holds a prefix of are
extended, and identical ones are left alone, so a second import writes
nothing. A stored unit that disagrees with the file is a conflict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from partner_memory.clock import Clock, system_clock
from partner_memory.errors import ConflictError
from partner_memory.interop.partner_state import (
    COGNITION_FILE,
    PartnerState,
    read_partner_state,
)
from partner_memory.model import MemoryUnit, Message, Record, check_namespace
from partner_memory.recall.analyze import default_analysis
from partner_memory.recall.indexer import RECALL_CONSUMER
from partner_memory.rolling.increment import by_content, resolve_increment
from partner_memory.store.contract.base import BulkWrite, MemoryStore, UnitWrite
from partner_memory.store.contract.capabilities import RecallStore


@dataclass(slots=True)
class ImportReport(Record):
    json_keys: ClassVar[Mapping[str, str]] = {
        "units_created": "created_unit_count",
        "units_extended": "extended_unit_count",
        "units_unchanged": "unchanged_unit_count",
        "messages_added": "added_message_count",
        "slices_added": "added_slice_count",
        "trajectory_replaced": "replaced_window_message_count",
    }

    namespace: str
    memory_session_id: str
    units_created: int = 0
    units_extended: int = 0
    units_unchanged: int = 0
    messages_added: int = 0
    slices_added: int = 0
    #: Messages of the imported trajectory (core/cognition.json); None when absent or unchanged.
    trajectory_replaced: int | None = None
    skipped: list[str] = field(default_factory=list)
    normalised: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.units_created
            or self.units_extended
            or self.messages_added
            or self.trajectory_replaced is not None
        )


def _plan_unit(
    store: MemoryStore, namespace: str, unit: MemoryUnit
) -> tuple[UnitWrite | None, bool]:
    """What to write for one unit (None: nothing) and whether it is a new unit."""
    stored = store.get_unit(namespace, unit.id)
    if stored is None:
        return UnitWrite(unit.id, unit.timestamp, 0, unit.conversation_messages, unit.slices), True
    held = store.read_messages(namespace, unit.id, 0, stored.message_count)
    incoming = unit.conversation_messages
    if len(held) > len(incoming):
        raise ConflictError(
            f"unit {unit.id!r} holds {len(held)} messages in namespace {namespace!r},"
            f" more than the {len(incoming)} in the state directory; nothing imported"
        )
    for position, (old, new) in enumerate(zip(held, incoming, strict=False)):
        if (old.role, old.content) != (new.role, new.content):
            raise ConflictError(
                f"unit {unit.id!r} differs from the stored one at message {position};"
                " nothing imported"
            )
    known = {s.id for s in store.read_slices(namespace, unit.id)}
    new_slices = [s for s in unit.slices if s.id not in known]
    new_messages = incoming[len(held) :]
    if not new_messages and not new_slices:
        return None, False
    timestamp = max(stored.timestamp, unit.timestamp)
    return UnitWrite(unit.id, timestamp, len(held), new_messages, new_slices), False


def import_partner_state(
    store: MemoryStore,
    state_dir: str | Path,
    *,
    namespace: str,
    clock: Clock = system_clock,
    replace_window: bool = False,
) -> ImportReport:
    """Import `state_dir` into `namespace`, adopting its memory session id.

    A `core/cognition.json` replaces the stored window only if nothing
    recorded but not yet rolled would be lost, or `replace_window` says so.
    """
    namespace = check_namespace(namespace)
    state = read_partner_state(state_dir, namespace=namespace, now=clock())
    report = ImportReport(
        namespace=namespace,
        memory_session_id=state.memory_session_id,
        skipped=state.skipped,
        normalised=state.normalised,
    )
    writes: list[UnitWrite] = []
    for unit in state.units:
        write, created = _plan_unit(store, namespace, unit)
        if write is None:
            report.units_unchanged += 1
            continue
        writes.append(write)
        if created:
            report.units_created += 1
        else:
            report.units_extended += 1
        report.messages_added += len(write.messages)
        report.slices_added += len(write.slices)
    trajectory = _plan_trajectory(store, namespace, state, replace_window=replace_window)
    if trajectory is not None:
        report.trajectory_replaced = len(trajectory)
    current = store.get_namespace(namespace)
    if (
        writes
        or trajectory is not None
        or current is None
        or current.memory_session_id != state.memory_session_id
    ):
        store.write_units(
            namespace, BulkWrite(state.memory_session_id, writes, trajectory=trajectory)
        )
        if writes and isinstance(store, RecallStore):  # units written without a rolling:
            store.reindex_recall(namespace, RECALL_CONSUMER, default_analysis())  # indexed here
    return report


def _plan_trajectory(
    store: MemoryStore, namespace: str, state: PartnerState, *, replace_window: bool
) -> list[Message] | None:
    """The window to store, or None when the file is absent or the stored one is the same.

    The reference's window repeats the newest messages of the current unit
    (what a rolling kept); matching them by content, the reference's rule,
    gives them the unit's message ids, so the next rolling does not store
    them twice.
    """
    if state.chat_messages is None:
        return None
    current = next((u for u in state.units if u.id == state.memory_session_id), None)
    unit_messages = current.conversation_messages if current is not None else ()
    chat = state.chat_messages
    matched = len(chat) - len(resolve_increment(unit_messages, chat, key=by_content))
    tail = unit_messages[len(unit_messages) - matched :] if matched else ()
    window = [replace(c, id=u.id) for c, u in zip(chat[:matched], tail, strict=True)]
    window += chat[matched:]
    if store.get_namespace(namespace) is not None:
        held = store.load_trajectory(namespace).messages
        if [(m.id, m.role, m.content) for m in held] == [(m.id, m.role, m.content) for m in window]:
            return None
        kept = {m.id for m in window} | store.stored_message_ids(namespace, [m.id for m in held])
        lost = [m for m in held if m.id not in kept]
        if lost and not replace_window:
            raise ConflictError(
                f"importing {COGNITION_FILE} would drop {len(lost)} message(s) recorded in"
                f" namespace {namespace!r} but not yet rolled into a unit (the first:"
                f" {lost[0].content[:60]!r}); roll them first, or import with --replace-window;"
                " nothing imported"
            )
    return window
