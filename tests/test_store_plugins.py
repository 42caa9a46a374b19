"""A backend from another distribution, named by its URL scheme.

The test writes a small distribution (a module and its `.dist-info` with an
entry point under `partner_memory.stores`) into a folder on the import path,
as pip would install it, and opens it the ways a user would: `open_store`,
`serve --db tiny:///...` and the CLI's `--db`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from partner_memory.client import MemoryClient
from partner_memory.errors import ConfigurationError
from partner_memory.store import open_store
from tests.http_server import Server

PLUGIN = '''
"""A backend of another distribution: SQLite files under the scheme tiny://."""

from partner_memory.store.sqlite import SQLiteStore


class TinyStore(SQLiteStore):
    pass


def open_tiny(url, options):
    return TinyStore(
        url.removeprefix("tiny://"),
        create=options.create,
        busy_timeout=options.busy_timeout,
        read_only=options.read_only,
    )


def not_a_store(url, options):
    return {"url": url}
'''

ENTRY_POINTS = """
[partner_memory.stores]
tiny = tiny_backend:open_tiny
broken = tiny_backend:not_a_store
missing = tiny_backend_gone:open
memory = tiny_backend:not_a_store
"""


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the distribution, on this process's path and its children's."""
    site = tmp_path / "site"
    (site / "tiny_backend").mkdir(parents=True)
    (site / "tiny_backend" / "__init__.py").write_text(PLUGIN)
    info = site / "tiny_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(site))
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    return tmp_path


def test_a_declared_scheme_opens_its_backend(installed: Path) -> None:
    store = open_store(f"tiny://{installed / 'a.db'}")
    try:
        assert type(store).__name__ == "TinyStore"
        assert (installed / "a.db").exists()
    finally:
        store.close()


def test_a_bad_plugin_is_a_configuration_error_naming_it(installed: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not meet the core store contract"):
        open_store("broken://x")
    with pytest.raises(ConfigurationError, match="tiny_backend_gone"):
        open_store("missing://x")
    with pytest.raises(ConfigurationError, match=r"memory, missing, postgres.*tiny"):
        open_store("nosuch://x")
    assert type(open_store("memory://")).__name__ == "InMemoryStore"  # built in, kept


def test_serve_and_the_cli_open_a_plugin_backend(installed: Path) -> None:
    database = f"tiny://{installed / 'served.db'}"
    server = Server(database)
    try:
        with MemoryClient(server.url, "agent") as client:
            client.record_turn("My sister lives in Lisbon", "Noted")
            found = client.recall("where does my sister live?")
            assert "Lisbon" in found.hits[0].message.content
    finally:
        server.stop()
    assert (installed / "served.db").exists()
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "partner_memory",
            "window",
            "--db",
            database,
            "-n",
            "agent",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    said = [m["content"] for m in json.loads(shown.stdout)["messages"]]
    assert any("Lisbon" in text for text in said)
