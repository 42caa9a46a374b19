"""The library leaves the host application's logging alone: importing it, using recall
(which loads the static embedding model, whose import configures logging) and serving
HTTP with MCP (whose SDK configures it when a server is built) change neither the
root logger's handlers nor its level."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import logging, sys
root = logging.getLogger()
before = (list(root.handlers), root.level)
from partner_memory import PartnerMemory, open_store
with PartnerMemory(open_store(sys.argv[1]), "host", idle_timer=False) as memory:
    memory.record_turn("I'm off to Kyoto in April.", "Book early!")
    assert memory.recall("where am I travelling?").hits
from starlette.testclient import TestClient
from partner_memory.http.app import create_app
from partner_memory.service import MemoryService
app = create_app(MemoryService.open(sys.argv[1]), owns_service=True)
with TestClient(app, base_url="http://127.0.0.1") as client:
    assert client.get("/healthz").status_code == 200
after = (list(root.handlers), root.level)
print(before == after, after)
"""


def test_recall_leaves_the_root_logger_as_it_was(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "memory.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.startswith("True"), done.stdout + done.stderr
