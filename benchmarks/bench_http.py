"""The HTTP service under load, beside the stack's own ceiling and the library in process.

`partner-memory serve` with 4 workers on PostgreSQL; a load generator in its
own process (aiohttp on uvloop, loopback only): 64 concurrent clients over
1,000 namespaces for 60 s, each request a recorded turn (4 in 5) or a
recall: once as fast as answers come (the rate sustained), once paced at
`--pace` requests/s per client (latency at a load below saturation, counted
from when each request was due). After each, every acknowledged turn is
checked to be stored exactly once. Beside it, in the same run: a bare
FastAPI endpoint that does nothing (same uvicorn, same 4 workers, same
generator) and the library called in process
(64 threads on one `MemoryService`). Prints requests/s and p50/p99 per
endpoint.

Usage: python benchmarks/bench_http.py [--seconds 60] [--clients 64] [--namespaces 1000]
       [--pace 2] [--pg URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is not on every platform
    uvloop = None

from bench_ingest import pct, pg_schema_url  # same folder: the scripts share helpers

ROOT = Path(__file__).resolve().parent.parent
RECALL_SHARE = 0.2
RECALL_BODY = {"query": "kiwi trip", "k": 5}
#: Where the servers' own output goes (errors only: access logs are off).
SERVER_LOG = Path(tempfile.gettempdir()) / "partner-memory-bench-http.log"


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(command: list[str], url: str, health: str = "/healthz") -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=open(SERVER_LOG, "ab"),  # noqa: SIM115
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}{health}", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{command} did not start")


async def load(
    url: str, seconds: float, clients: int, namespaces: int, *, bare: bool, pace: float
) -> dict[str, Any]:
    """The generator: latencies per endpoint and the acknowledged message ids.

    With `pace` 0 each client sends its next request as soon as the last is
    answered (the rate the service sustains). With `pace` > 0 each client sends
    `pace` requests/s on a fixed schedule, and a latency counts from when the
    request was due, so a stalled server is not hidden by clients that wait.
    """
    import aiohttp

    latencies: dict[str, list[float]] = {"turn": [], "recall": []}
    acknowledged: list[str] = []
    errors = 0
    began_at = time.monotonic()
    stop = began_at + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:

        async def worker(number: int) -> None:
            nonlocal errors
            rng = random.Random(number)
            turn = 0
            due = began_at + (rng.random() / pace if pace else 0)
            while (now := time.monotonic()) < stop:
                if pace:
                    await asyncio.sleep(max(0.0, due - now))
                namespace = f"ns-{rng.randrange(namespaces):04d}"
                recall = rng.random() < RECALL_SHARE
                if bare:
                    path, body = "/nothing", {"n": turn}
                elif recall:
                    path, body = f"/v1/namespaces/{namespace}/recall", RECALL_BODY
                else:
                    path = f"/v1/namespaces/{namespace}/turns"
                    body = {
                        "user_input": f"client {number} turn {turn}: a kiwi trip",
                        "assistant_output": "noted",
                    }
                sent = time.monotonic()
                try:
                    async with session.post(path, json=body) as response:
                        status = response.status
                        answer = await response.json() if status < 300 else None
                except (aiohttp.ClientError, TimeoutError):
                    status = 599  # no answer: counted as failed, the turn may still be stored
                spent = (time.monotonic() - (min(due, sent) if pace else sent)) * 1000
                turn += 1
                due += 1 / pace if pace else 0
                if status >= 300:
                    if not (recall and status == 404):  # not recorded into yet
                        errors += 1
                    continue
                latencies["recall" if recall and not bare else "turn"].append(spent)
                if not bare and not recall:
                    acknowledged.extend(m["id"] for m in answer["messages"])

        await asyncio.gather(*(worker(n) for n in range(clients)))
    return {"latencies": latencies, "acknowledged": acknowledged, "errors": errors}


def in_process(database: str, seconds: float, clients: int, namespaces: int) -> dict[str, Any]:
    """The same mix on the library, `clients` threads over one service."""
    from partner_memory import MemoryService, NotFoundError

    service = MemoryService.open(database)
    latencies: dict[str, list[float]] = {"turn": [], "recall": []}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker(number: int) -> None:
        rng = random.Random(number)
        turn = 0
        while time.monotonic() < stop:
            namespace = f"lib-{rng.randrange(namespaces):04d}"
            recall = rng.random() < RECALL_SHARE
            began = time.perf_counter()
            try:
                memory = service.memory(namespace, create=not recall)
                if recall:
                    memory.recall("kiwi trip", k=5, activate=False)
                else:
                    memory.record_turn(f"client {number} turn {turn}: a kiwi trip", "noted")
            except NotFoundError:
                continue
            spent = (time.perf_counter() - began) * 1000
            turn += 1
            with lock:
                latencies["recall" if recall else "turn"].append(spent)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    service.close()
    return {"latencies": latencies}


def row(name: str, result: dict[str, Any], seconds: float) -> list[str]:
    lines = []
    for endpoint, samples in result["latencies"].items():
        if samples:
            lines.append(
                f"| {name} | {endpoint} | {len(samples) / seconds:,.0f} |"
                f" {statistics.median(samples):.1f} | {pct(samples, 0.99):.1f} |"
            )
    return lines


def stored_once(database: str, acknowledged: list[str]) -> str:
    """Every acknowledged message stored exactly once (in memory or the window)."""
    from partner_memory.core import MemoryCore
    from partner_memory.store import open_store

    store = open_store(database)
    seen: list[str] = []
    for info in store.list_namespaces(limit=100_000):
        core = MemoryCore(store, info.name, create=False)
        stored = [m.id for unit in core.unit_ids() for m in core.read_messages(unit)]
        window = [m.id for m in store.load_trajectory(info.name).messages]
        seen += list(dict.fromkeys([*stored, *window]))
        if len(stored) != len(set(stored)):
            return f"{info.name}: a message stored twice"
    store.close()
    missing = set(acknowledged) - set(seen)
    if missing or len(acknowledged) != len(set(acknowledged)):
        return f"{len(missing):,} of {len(acknowledged):,} acknowledged messages NOT stored once"
    unacknowledged = len(seen) - len(set(acknowledged))
    return (
        f"all {len(acknowledged):,} acknowledged messages stored exactly once"
        f" ({unacknowledged:,} stored without an answer reaching the client)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--namespaces", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--pace", type=float, default=2.0, help="requests/s per client in the paced run"
    )
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--load", help=argparse.SUPPRESS)  # the generator's own process
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        work = load(
            args.load, args.seconds, args.clients, args.namespaces, bare=args.bare, pace=args.pace
        )
        result = uvloop.run(work) if uvloop else asyncio.run(work)
        Path(args.out).write_text(json.dumps(result))
        return
    database = pg_schema_url(args.pg)
    serve = [sys.executable, "-m", "partner_memory", "serve", "--db", database]
    bare = [sys.executable, "-m", "uvicorn", "bare_app:app", "--app-dir", "benchmarks",
            "--log-level", "warning"]  # fmt: skip
    paced = f"paced, {args.pace:g} req/s per client, after it"
    lines, checks, rates = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, command, phases in [
            ("partner-memory serve", serve, [("", 0.0), (f" ({paced})", args.pace)]),
            ("bare FastAPI endpoint", bare, [("", 0.0)]),
        ]:
            is_bare = command is bare
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            server = start([*command, "--port", str(port), "--workers", str(args.workers)], url)
            acknowledged, errors = [], 0
            for number, (phase, pace) in enumerate(phases):  # one server: paced runs warm
                out = Path(tmp) / f"{port}-{number}.json"
                subprocess.run(
                    [sys.executable, __file__, "--load", url, "--out", str(out),
                     "--seconds", str(args.seconds), "--clients", str(args.clients),
                     "--namespaces", str(args.namespaces), "--pace", str(pace),
                     *(["--bare"] if is_bare else [])],
                    check=True, cwd=ROOT / "benchmarks", env=dict(os.environ),
                )  # fmt: skip
                result = json.loads(out.read_text())
                lines += row(name + phase, result, args.seconds)
                rates[name + phase] = sum(map(len, result["latencies"].values())) / args.seconds
                acknowledged += result["acknowledged"]
                errors += result["errors"]
            server.terminate()
            server.wait(60)
            if not is_bare:
                checks.append(
                    f"{name}: {stored_once(database, acknowledged)}; {errors} failed requests"
                )
        library = in_process(database, args.seconds, args.clients, args.namespaces)
        lines += row(f"library in process ({args.clients} threads)", library, args.seconds)
    print(
        f"\n{args.clients} clients, {args.namespaces:,} namespaces, {args.seconds:.0f} s each,"
        f" {args.workers} workers, PostgreSQL; {RECALL_SHARE:.0%} recalls\n"
    )
    print("| system | endpoint | requests/s | p50 ms | p99 ms |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(lines))
    ratio = rates["partner-memory serve"] / rates["bare FastAPI endpoint"]
    print(f"\nserve / bare request rate: {ratio:.2f}x")
    for check in checks:
        print(f"after {check}")


if __name__ == "__main__":
    main()
