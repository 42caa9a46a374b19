"""The shipped suite calls every verb it vouches for.

It runs, as a third party would, against the reference backend behind a proxy
that records each verb called (a property read counts as a call); every verb
of the core layers and of each capability must have been called by some test.
A verb only named in a comment or a skipped test does not count.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from partner_memory.store.contract.capabilities import CAPABILITIES
from partner_memory.testing.report import LAYERS, verbs
from tests.helpers import run_test_module

MODULE = '''
import json

import pytest

from partner_memory.store.memory.store import InMemoryStore
from partner_memory.testing import StoreContract

CALLED = set()


class Recording:
    """The store, each verb called noted."""

    def __init__(self, inner):
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        if name.startswith("_"):
            return value
        if not callable(value):
            CALLED.add(name)
            return value

        def called(*args, **kwargs):
            CALLED.add(name)
            return value(*args, **kwargs)

        return called


@pytest.fixture(scope="session", autouse=True)
def noted():
    yield
    with open("called.json", "w") as out:
        json.dump(sorted(CALLED), out)


class TestRecorded(StoreContract):
    @pytest.fixture
    def store(self):
        opened = InMemoryStore()
        yield Recording(opened)
        opened.close()
'''


def _suite(folder: Path, name: str, source: str) -> subprocess.CompletedProcess[str]:
    done = run_test_module(folder, name, source, "-rA")
    assert done.returncode == 0, done.stdout[-3000:]
    return done


def test_the_shipped_suite_calls_every_verb(tmp_path: Path) -> None:
    _suite(tmp_path, "test_recorded.py", MODULE)
    called = set(json.loads((tmp_path / "called.json").read_text()))
    protocols = [*LAYERS.values(), *CAPABILITIES.values()]
    vouched = {v for p in protocols for v in verbs(p)}
    assert len(vouched) > 50
    assert sorted(vouched - called) == []


PARTIAL = '''
import pytest

from partner_memory.store.contract.capabilities import RecallStore, TopicStore
from partner_memory.store.memory.store import InMemoryStore
from partner_memory.testing import StoreContract, report


class Partial(InMemoryStore):
    """The reference backend without recall rows or topics."""


for capability in (RecallStore, TopicStore):
    for verb in [v for v in vars(capability) if not v.startswith("_")]:
        setattr(Partial, verb, None)


def test_the_report_says_what_it_lacks():
    said = report(Partial())
    assert said.core
    assert not said.capabilities["recall rows"] and not said.capabilities["topics"]
    assert "- topics" in str(said)


class TestPartial(StoreContract):
    @pytest.fixture
    def store(self):
        opened = Partial()
        yield opened
        opened.close()
'''


def test_a_backend_without_some_capabilities_passes_by_refusing_them(tmp_path: Path) -> None:
    done = _suite(tmp_path, "test_partial.py", PARTIAL)
    for refusal in (
        "test_a_capability_it_lacks_is_refused_by_name",
        "test_a_capability_row_it_does_not_keep_is_refused[FiledTopics]",
        "test_a_capability_row_it_does_not_keep_is_refused[IndexedMessages]",
    ):
        assert f"PASSED test_partial.py::TestPartial::{refusal}" in done.stdout
