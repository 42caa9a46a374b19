"""Clients that trickle their headers are cut off at the header deadline (408), while the
service goes on answering everyone else."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http_server import Server

TRICKLERS = 60


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    running = Server(str(tmp_path / "m.db"), "--header-timeout", "1")
    yield running
    running.stop()


def test_trickling_headers_are_cut_off_and_others_are_served(served: Server) -> None:
    tricklers = []
    for _ in range(TRICKLERS):
        conn = socket.create_connection(("127.0.0.1", served.port), timeout=30)
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        tricklers.append(conn)
    closed: dict[int, bytes] = {}
    deadline = time.monotonic() + 60  # bounded; on a loaded machine the cut may come late
    while len(closed) < TRICKLERS and time.monotonic() < deadline:
        for i, conn in enumerate(tricklers):
            if i in closed:
                continue
            try:
                conn.sendall(b"a")  # one more byte of the header: never the end of it
                conn.settimeout(0.01)
                answer = conn.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                answer = b""
            closed[i] = answer
        with served.client() as http:  # meanwhile the service answers others
            assert http.get("/healthz").status_code == 200
        time.sleep(0.2)
    assert len(closed) == TRICKLERS
    assert all(a == b"" or a.startswith(b"HTTP/1.1 408") for a in closed.values())
    for conn in tricklers:
        conn.close()


def test_a_request_whose_headers_arrive_in_time_is_served(served: Server) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as conn:
        for piece in (b"GET /healthz HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n", b"\r\n"):
            conn.sendall(piece)
            time.sleep(0.1)
        assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # kept alive
        assert conn.recv(4096).startswith(b"HTTP/1.1 200")


def test_a_bad_header_timeout_is_refused(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from partner_memory.cli import app

    result = CliRunner().invoke(
        app, ["serve", "--db", str(tmp_path / "m.db"), "--header-timeout", "0"]
    )
    assert result.exit_code != 0
    assert "--header-timeout" in result.output
