"""The store contract as tests a backend runs: `partner_memory.testing`.

A backend passes when every test here passes against it. Subclass
`StoreContract` in a test module and give it a `store` fixture that yields a
fresh, empty store of your backend (closed afterwards); pytest collects the
rest:

    import pytest
    from partner_memory.testing import StoreContract

    class TestMyBackend(StoreContract):
        @pytest.fixture
        def store(self):
            opened = MyStore(...)
            yield opened
            opened.close()

The core layers (`UnitContract`, `WindowContract`, `LogContract`) hold for
every backend; each capability's tests run where the backend offers it
(`partner_memory.store.supports`) and are skipped where it does not. The suite
needs pytest and hypothesis (`pip install -e '.[test]' in a clone of partner-memory`). The
in-memory backend (`memory://`), SQLite and PostgreSQL pass it.
"""

from __future__ import annotations

from partner_memory.testing.capabilities import (
    DumpContract,
    ForgetContract,
    HealthContract,
    InspectionContract,
    KeysContract,
    RecallContract,
    TopicsContract,
)
from partner_memory.testing.items import ItemsContract
from partner_memory.testing.log import LogContract, RecordContract
from partner_memory.testing.refusals import RefusalContract
from partner_memory.testing.report import BackendReport, report
from partner_memory.testing.units import UnitContract
from partner_memory.testing.window import WindowContract

__all__ = [
    "BackendReport",
    "CapabilityContracts",
    "CoreContract",
    "DumpContract",
    "ForgetContract",
    "HealthContract",
    "InspectionContract",
    "ItemsContract",
    "KeysContract",
    "LogContract",
    "RecallContract",
    "RecordContract",
    "RefusalContract",
    "StoreContract",
    "TopicsContract",
    "UnitContract",
    "WindowContract",
    "report",
]


class CoreContract(UnitContract, WindowContract, LogContract):
    """The three layers every backend implements."""


class CapabilityContracts(
    KeysContract,
    RecordContract,
    TopicsContract,
    RecallContract,
    ForgetContract,
    DumpContract,
    InspectionContract,
    ItemsContract,
    HealthContract,
):
    """The optional capabilities, each skipped where the backend lacks it."""


class StoreContract(CoreContract, CapabilityContracts, RefusalContract):
    """Everything: what `open_store` backends pass."""
