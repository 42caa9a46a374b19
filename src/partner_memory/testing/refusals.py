"""What a backend does not offer it refuses by name, and changes nothing.

A capability a backend lacks is named by `require` (so the interface that
needed it says what to install or choose); the rows only a capability keeps
(`IndexedMessages` for recall, `FiledTopics` for topics, a consumer's own
`Record`s) are refused when a
consumer stages them, and the consumer's position stays where it was - never
written nowhere while the log moves on.
"""

from __future__ import annotations

import pytest

from partner_memory.errors import ConfigurationError, InvalidInputError
from partner_memory.model import LogEntry
from partner_memory.rolling.follow import LogFollower
from partner_memory.store.contract.base import AppendOptions, MemoryStore
from partner_memory.store.contract.capabilities import (
    CAPABILITIES,
    RecallStore,
    RecordStore,
    TopicStore,
    require,
    supports,
)
from partner_memory.store.contract.staged import FiledTopics, IndexedMessages, Record, Staged
from partner_memory.testing.helpers import messages, rolling

#: Each capability row, and the capability that keeps it.
ROWS: dict[str, tuple[type, Staged]] = {
    "IndexedMessages": (RecallStore, IndexedMessages([("user", "m-0", None)], "words")),
    "FiledTopics": (TopicStore, FiledTopics(["travel"])),
    "Record": (RecordStore, Record("k", 1)),
}


class RefusalContract:
    """Refusals of what the backend does not offer (skipped for what it does)."""

    def test_a_capability_it_lacks_is_refused_by_name(self, store: MemoryStore) -> None:
        lacking = {n: c for n, c in CAPABILITIES.items() if not supports(store, c)}
        if not lacking:
            pytest.skip(f"{type(store).__name__} offers every capability")
        for name, capability in lacking.items():
            with pytest.raises(ConfigurationError, match=name):
                require(store, capability)

    @pytest.mark.parametrize("row", sorted(ROWS))
    def test_a_capability_row_it_does_not_keep_is_refused(
        self, store: MemoryStore, row: str
    ) -> None:
        capability, staged = ROWS[row]
        if supports(store, capability):
            pytest.skip(f"{type(store).__name__} keeps {row} ({capability.__name__})")
        said = messages(1)
        store.ensure_namespace("ns", "session-1")
        store.append_trajectory("ns", said, AppendOptions(last_interaction=1_000))
        assert store.begin_rolling("ns", "h", ttl_ms=60_000) is not None
        store.commit_rolling("ns", rolling("h", said, drop=[m.id for m in said]))

        def apply(entry: LogEntry) -> list[Staged]:
            return [staged]

        with pytest.raises(InvalidInputError, match=capability.__name__):
            LogFollower(store).round("follower", "ns", apply)
        assert store.lagging_namespaces("follower") == ["ns"]  # nothing moved on
