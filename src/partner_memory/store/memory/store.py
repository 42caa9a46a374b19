"""`open_store("memory://")`: the reference backend, in plain Python, for tests and as the spec.

It implements the core layers and every capability with the semantics the
SQL backends have (the shipped conformance suite, `partner_memory.testing`,
runs on all of them), so a service over it behaves as over a database - only
nothing survives the process. `memory://name` names a memory shared by every
store of that name in the process; `memory://` is a fresh one each time.
"""

from __future__ import annotations

from collections.abc import Sequence

from partner_memory.model import Message
from partner_memory.store.memory.core import InMemoryCore
from partner_memory.store.memory.extras import ExtrasMixin
from partner_memory.store.memory.items import ItemsMixin


class InMemoryStore(ExtrasMixin, ItemsMixin, InMemoryCore):
    """A `MemoryStore` and every capability, kept in this process's memory."""

    # where each stored message is, kept for the forgets: a lookup, not a walk of the units
    def find_messages(self, namespace: str, message_ids: Sequence[str]) -> dict[str, Message]:
        with self._reading() as shared:
            state = self._state(shared, namespace)
            places = {i: state.located[i] for i in message_ids if i in state.located}
            return {i: state.units[u].messages[p] for i, (u, p) in places.items()}
