"""A real `partner-memory serve` process on a free loopback port, for the HTTP tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from typer.testing import CliRunner

from partner_memory.cli import app

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


#: An MCP `initialize` request, and the Accept header streamable HTTP wants, for probes.
MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"},
    },
}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


class Server:
    """`partner-memory serve` (or `inspect`, the read-only inspector) on a free port,
    ready when constructed."""

    def __init__(self, database: str, *args: str, command: str = "serve", cwd: Path = ROOT) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, PARTNER_MEMORY_ROLLING_IDLE_CHECK_INTERVAL_S="0")
        if command == "inspect":
            args = ("--no-browser", *args)
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "partner_memory", command),
                *("--db", database, "--port", str(self.port), *args),
            ],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120  # readiness, however loaded the machine is
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.process.stdout.read().decode() if self.process.stdout else ""
                raise RuntimeError(f"the server exited: {output}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("the server did not start")

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def stop(self) -> str:
        self.process.terminate()
        try:
            out, _ = self.process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        return out.decode() if out else ""


def make_key(database: str, namespaces: str, scope: str) -> tuple[str, str]:
    made = CliRunner().invoke(
        app,
        [
            "keys",
            "create",
            "--namespaces",
            namespaces,
            "--scope",
            scope,
            "--db",
            database,
            "--json",
        ],
    )
    assert made.exit_code == 0, made.output
    document = json.loads(made.output)
    return document["key"]["id"], document["token"]
