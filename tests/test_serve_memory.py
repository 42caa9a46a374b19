"""`serve` gives memory back after a burst: 50 messages of 1 MB and one of 10 MB, then a
recall over that window, leave the process near where it started once the burst is
over, not at its peak (the allocator is trimmed; a window's analysis is held once, its
terms interned, and let go when the namespace is forgotten)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.http_server import Server

MB = 1 << 20


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")
def test_resident_memory_returns_after_a_burst(tmp_path: Path) -> None:
    server = Server(str(tmp_path / "m.db"), "--max-body", str(32 * MB))
    pid = server.process.pid
    try:
        with server.client() as http:
            said = {"messages": [{"role": "user", "content": "a first word"}]}
            assert http.post("/v1/namespaces/warm/messages", json=said).status_code == 201
            assert http.post("/v1/namespaces/warm/recall", json={"query": "word"}).is_success
            time.sleep(3)  # the model loaded, the allocator settled
            start = _rss(pid)
            big = "word " * 200_000
            for i in range(50):
                said = {"messages": [{"role": "user", "content": f"{big}{i}"}]}
                assert http.post("/v1/namespaces/a/messages", json=said).status_code == 201
            said = {"messages": [{"role": "user", "content": "x " * 5_000_000}]}
            assert http.post("/v1/namespaces/a/messages", json=said).status_code == 201
            assert http.post("/v1/namespaces/a/recall", json={"query": "word"}).is_success
            peak = _rss(pid)
            assert http.delete("/v1/namespaces/a").status_code == 200
            deadline = time.monotonic() + 60  # the trimmer looks every 2 s, however busy
            now = _rss(pid)
            while now > start + 64 * MB and time.monotonic() < deadline:
                time.sleep(0.5)
                now = _rss(pid)
        assert now <= start + 64 * MB, (
            f"resident {now // MB} MB after the burst: started at {start // MB},"
            f" peaked at {peak // MB}"
        )
    finally:
        server.stop()
