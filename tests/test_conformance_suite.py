"""`partner_memory.testing` as a third party runs it: a test module of their own, with
a `store` fixture and nothing of this repository's tests - and it fails a wrong backend."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import run_test_module

MODULE = '''
import pytest

from partner_memory.store.memory.store import InMemoryStore
from partner_memory.testing import StoreContract


class Careless(InMemoryStore):
    """Slices in the order they were written, not by their time."""

    def read_slices(self, namespace, unit_id):
        with self._reading() as shared:
            unit = self._unit(shared, namespace, unit_id)
            return [] if unit is None else [s for _, s in unit.slices]


class TestBackend(StoreContract):
    @pytest.fixture
    def store(self):
        opened = {backend}()
        yield opened
        opened.close()
'''


def _run(tmp_path: Path, backend: str) -> subprocess.CompletedProcess[str]:
    return run_test_module(tmp_path, "test_my_backend.py", MODULE.replace("{backend}", backend))


@pytest.mark.parametrize("kind", ["InMemoryStore", "Careless"])
def test_a_backend_runs_the_shipped_suite(tmp_path: Path, kind: str) -> None:
    done = _run(tmp_path, kind)
    if kind == "InMemoryStore":
        assert done.returncode == 0, done.stdout[-3000:]
        assert " passed" in done.stdout
        assert "failed" not in done.stdout
    else:
        assert done.returncode == 1, done.stdout[-3000:]
        assert "test_slices_order_by_timestamp" in done.stdout
