"""`open_store("memory://")`: the reference backend, in plain Python, for tests and as the spec.

It implements the core layers and every capability with the semantics the
SQL backends have (the shipped conformance suite, `partner_memory.testing`,
runs on all of them), so a service over it behaves as over a database - only
nothing survives the process. `memory://name` names a memory shared by every
store of that name in the process; `memory://` is a fresh one each time.
"""

from __future__ import annotations

from partner_memory.store.memory.core import InMemoryCore
from partner_memory.store.memory.extras import ExtrasMixin
from partner_memory.store.memory.items import ItemsMixin


class InMemoryStore(ExtrasMixin, ItemsMixin, InMemoryCore):
    """A `MemoryStore` and every capability, kept in this process's memory."""
