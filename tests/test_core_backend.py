"""A backend that writes only the core's essential verbs: at most twenty, the rest
inherited (`store.derived`), and still a whole memory.

`InMemoryCore` is that backend: it writes `ESSENTIAL` and nothing more. The
shipped suite runs on it as a third party would (the capabilities skipped or
refused), and a memory over it records, rolls, gives its context and its stats.
"""

from __future__ import annotations

from pathlib import Path

from partner_memory.memory import PartnerMemory
from partner_memory.model import RollingCost
from partner_memory.store.contract.base import AppendOptions
from partner_memory.store.contract.derived import ESSENTIAL, DerivedVerbs
from partner_memory.store.memory.core import InMemoryCore
from partner_memory.testing import report
from partner_memory.testing.helpers import messages, rolling
from partner_memory.testing.report import LAYERS, verbs
from tests.helpers import run_test_module


def _written(kind: type) -> set[str]:
    """The core verbs `kind` writes itself: those not inherited from `DerivedVerbs`."""
    core = {v for protocol in LAYERS.values() for v in verbs(protocol)}
    properties = {"url", "read_only", "capabilities"}
    written = set()
    for verb in core - properties:
        owner = next(c for c in kind.__mro__ if verb in vars(c))
        if owner is not DerivedVerbs:
            written.add(verb)
    return written


def test_a_core_backend_writes_twenty_verbs_at_most() -> None:
    written = _written(InMemoryCore)
    assert written == set(ESSENTIAL)
    assert len(written) <= 20
    said = report(InMemoryCore())
    assert said.core
    assert not any(said.capabilities.values())


MODULE = """
import pytest

from partner_memory.store.memory.core import InMemoryCore
from partner_memory.testing import StoreContract


class TestCore(StoreContract):
    @pytest.fixture
    def store(self):
        opened = InMemoryCore()
        yield opened
        opened.close()
"""


def test_the_shipped_suite_passes_on_the_core_alone(tmp_path: Path) -> None:
    done = run_test_module(tmp_path, "test_core.py", MODULE, "-rA")
    assert done.returncode == 0, done.stdout[-3000:]
    for refused in ("Record", "IndexedMessages", "FiledTopics"):
        name = f"test_a_capability_row_it_does_not_keep_is_refused[{refused}]"
        assert f"PASSED test_core.py::TestCore::{name}" in done.stdout
    assert "PASSED test_core.py::TestCore::test_a_capability_it_lacks_is_refused_by_name" in (
        done.stdout
    )
    assert " failed" not in done.stdout


def test_a_memory_over_the_core_alone_rolls_and_counts_its_cost() -> None:
    memory = PartnerMemory(InMemoryCore(), "core", idle_timer=False, owns_store=True)
    try:
        for i in range(40):
            memory.record_turn(f"question {i} about the garden", f"answer {i}: water the roses")
        memory.roll_now()
        memory.wait()
        totals = memory.stats()
        assert totals.rollings >= 1
        assert totals.messages >= 40
        assert totals.pipeline_ms > 0
        assert sum(totals.by_summarizer.values()) == totals.rollings
        assert "roses" in memory.context_xml()
    finally:
        memory.close()


def test_the_log_carries_each_rollings_cost() -> None:
    store = InMemoryCore()
    store.ensure_namespace("ns", "s")
    said = messages(2)
    store.append_trajectory("ns", said, AppendOptions(last_interaction=1))
    assert store.begin_rolling("ns", "h", ttl_ms=60_000) is not None
    store.commit_rolling("ns", rolling("h", said, drop=[m.id for m in said]))
    (entry,) = store.read_log("ns", 0)
    assert entry.cost == RollingCost("extractive", pipeline_ms=1.5, fallbacks=("no LLM",))
    assert store.log_head("ns") == 1
