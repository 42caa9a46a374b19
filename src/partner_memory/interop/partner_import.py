"""Import a reference state directory into a namespace: all or nothing, idempotent.

The plan is computed against what the store holds, then written in one
transaction: new units are created, units the store holds a prefix of are
extended, and identical ones are left alone, so a second import writes
nothing. A stored unit that disagrees with the file is a conflict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from partner_memory.clock import Clock, system_clock
from partner_memory.errors import ConflictError
from partner_memory.interop.partner_state import read_partner_state
from partner_memory.model import MemoryUnit, check_namespace
from partner_memory.store.base import MemoryStore, UnitWrite


@dataclass(slots=True)
class ImportReport:
    namespace: str
    memory_session_id: str
    units_created: int = 0
    units_extended: int = 0
    units_unchanged: int = 0
    messages_added: int = 0
    slices_added: int = 0
    skipped: list[str] = field(default_factory=list)
    normalised: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.units_created or self.units_extended or self.messages_added)

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "memory_session_id": self.memory_session_id,
            "units_created": self.units_created,
            "units_extended": self.units_extended,
            "units_unchanged": self.units_unchanged,
            "messages_added": self.messages_added,
            "slices_added": self.slices_added,
            "skipped": self.skipped,
            "normalised": self.normalised,
        }


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
) -> ImportReport:
    """Import `state_dir` into `namespace`, adopting its memory session id."""
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
    current = store.get_namespace(namespace)
    if writes or current is None or current.memory_session_id != state.memory_session_id:
        store.write_units(namespace, state.memory_session_id, writes)
    return report
