"""Several `serve` hosts on one PostgreSQL: what a deployment that outgrows one
machine gets, measured on loopback.

1. Turns/s (and each request's p50/p99) of 8 client threads recording over HTTP,
   spread over 1, 2 and 4 `serve` processes on one PostgreSQL primary; then the
   p50 of a recall and of a listing (`GET /v1/namespaces`), each through three
   set-ups in the same run: straight to the primary, through PgBouncer in
   transaction pooling mode (`PARTNER_MEMORY_PG_POOLER=transaction`), and with a
   read replica for the listings (`PARTNER_MEMORY_PG_READ_URL`).
2. How long a forget on one host takes to leave another host's index files (the
   other host does not search meanwhile: its follower checks every
   `PARTNER_MEMORY_RECALL_FOLLOW_S`, 5 s by default).
3. The writers' pause when the primary fails over to its synchronous standby
   (8 writer threads, a multi-host URL).

The primary and its standby are started here from Debian's PostgreSQL server
binaries, PgBouncer from Debian's pgbouncer (the tests' own harness).

Usage: python benchmarks/bench_hosts.py [--turns 200] [--serves 1,2,4] [--queries 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import pg_cluster  # noqa: E402 - the tests' harness, beside this checkout
from tests.http_server import Server  # noqa: E402
from tests.pgbouncer import Bouncer  # noqa: E402

WRITERS = 8


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _write(servers: list[Server], turns: int) -> tuple[float, list[float]]:
    """Turns/s of WRITERS threads over the servers, and each request's latency (ms)."""
    latencies: list[float] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        clients = [s.client() for s in servers]
        mine = []
        try:
            for n in range(turns):
                body = {"user_input": f"writer {w} says {n}", "assistant_output": f"ok {n}"}
                started = time.perf_counter()
                answer = clients[(w + n) % len(clients)].post(
                    f"/v1/namespaces/bench-{w}/turns", json=body
                )
                answer.raise_for_status()
                mine.append((time.perf_counter() - started) * 1000)
        finally:
            for client in clients:
                client.close()
        with lock:
            latencies.extend(mine)

    started = time.perf_counter()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return WRITERS * turns / (time.perf_counter() - started), latencies


def _p50(servers: list[Server], queries: int, request: tuple[str, str, dict | None]) -> float:
    method, path, body = request
    times = []
    clients = [s.client() for s in servers]
    try:
        for n in range(queries):
            started = time.perf_counter()
            clients[n % len(clients)].request(method, path, json=body).raise_for_status()
            times.append((time.perf_counter() - started) * 1000)
    finally:
        for client in clients:
            client.close()
    return statistics.median(times)


def section_serves(serves: list[int], turns: int, queries: int) -> None:
    print("## 1. serve processes on one PostgreSQL (8 client threads over HTTP, loopback)\n")
    print(
        "| set-up | serves | turns/s | turn p50 ms | turn p99 ms | recall p50 ms | listing p50 ms |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    pair = pg_cluster.Pair(synchronous=False)
    bouncer = Bouncer(pair.primary.url, pool_size=20)
    setups = {
        "primary": (pair.primary.url, {}),
        "PgBouncer (transaction)": (
            bouncer.url("postgres"),
            {"PARTNER_MEMORY_PG_POOLER": "transaction"},
        ),
        "read replica for listings": (
            pair.primary.url,
            {"PARTNER_MEMORY_PG_READ_URL": pair.standby.url},
        ),
    }
    try:
        for name, (url, env) in setups.items():
            for count in serves:
                pair.primary.query("DROP SCHEMA public CASCADE")
                pair.primary.query("CREATE SCHEMA public")
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    servers = [Server(url) for _ in range(count)]
                finally:
                    for key, value in saved.items():
                        if value is None:
                            os.environ.pop(key, None)
                        else:
                            os.environ[key] = value
                try:
                    rate, latencies = _write(servers, turns)
                    recall = _p50(
                        servers,
                        queries,
                        ("POST", "/v1/namespaces/bench-0/recall", {"query": "writer says 7"}),
                    )
                    listing = _p50(servers, queries, ("GET", "/v1/namespaces", None))
                finally:
                    for server in servers:
                        server.stop()
                print(
                    f"| {name} | {count} | {rate:,.0f} | {_pct(latencies, 0.5):.1f} |"
                    f" {_pct(latencies, 0.99):.1f} | {recall:.1f} | {listing:.1f} |"
                )
    finally:
        bouncer.stop()
        pair.close()
    print()


def _copies(home: Path) -> set[Path]:
    """The index copies a host holds, each named by the file beside it."""
    return {p.with_suffix("") for p in home.glob("v*/*.namespace") if p.with_suffix("").is_dir()}


def section_forget(rounds: int) -> None:
    print("## 2. a forget on one host: until another host's index copy is deleted\n")
    pair = pg_cluster.Pair(synchronous=False)
    waits = []
    try:
        with tempfile.TemporaryDirectory() as home:
            os.environ["PARTNER_MEMORY_RECALL_INDEX"] = str(Path(home) / "b")
            b = Server(pair.primary.url)  # the other host: an index home of its own
            os.environ.pop("PARTNER_MEMORY_RECALL_INDEX")
            a = Server(pair.primary.url)
            try:
                for n in range(rounds):
                    secret = f"zebracode{n}x"
                    with a.client() as http_a, b.client() as http_b:
                        said = http_a.post(
                            "/v1/namespaces/hosts/turns",
                            json={"user_input": f"my code is {secret}", "assistant_output": "ok"},
                        ).json()
                        http_a.post("/v1/namespaces/hosts/roll", params={"idle": "true"})
                        http_b.post("/v1/namespaces/hosts/recall", json={"query": secret})
                        built = _copies(Path(home) / "b")
                        assert built, "the other host built no copy of the index"
                        started = time.monotonic()
                        ids = [said["messages"][0]["id"]]
                        http_a.post(
                            "/v1/namespaces/hosts/forget/messages", json={"message_ids": ids}
                        )
                        while built & _copies(Path(home) / "b"):  # the copy built before
                            time.sleep(0.05)
                        waits.append(time.monotonic() - started)
            finally:
                a.stop()
                b.stop()
    finally:
        pair.close()
    print(
        f"{rounds} forgets: the other host's copy was deleted after"
        f" {min(waits):.1f}-{max(waits):.1f} s (median {statistics.median(waits):.1f} s)\n"
    )


def section_failover() -> None:
    print("## 3. the writers' pause during a failover (synchronous standby, 8 threads)\n")
    from partner_memory import MemoryService
    from partner_memory.errors import StorageUnavailableError

    pair = pg_cluster.Pair(synchronous=True)
    acks: list[tuple[int, float]] = []
    stop = threading.Event()
    try:
        with MemoryService.open(pair.url) as service:

            def writer(w: int) -> None:
                memory = service.memory(f"failover-{w % 2}")
                while not stop.is_set():
                    try:
                        memory.record_turn(f"writer {w}", "ok")
                    except StorageUnavailableError:
                        time.sleep(0.05)
                        continue
                    acks.append((w, time.monotonic()))

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
            for thread in threads:
                thread.start()
            time.sleep(3)
            promoted = time.monotonic()
            pair.fail_over()
            time.sleep(5)
            stop.set()
            for thread in threads:
                thread.join()
    finally:
        pair.close()
    pauses = []
    for w in range(WRITERS):
        times = sorted(t for who, t in acks if who == w)
        before = [t for t in times if t < promoted]
        after = [t for t in times if t >= promoted]
        if before and after:
            pauses.append(after[0] - before[-1])
    print(
        f"pause per writer: p50 {statistics.median(pauses) * 1000:.0f} ms,"
        f" max {max(pauses) * 1000:.0f} ms (the primary killed, the standby promoted)\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="turns per client thread")
    parser.add_argument("--serves", default="1,2,4")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--forgets", type=int, default=3)
    parser.add_argument("--sections", default="serves,forget,failover")
    args = parser.parse_args()
    if not pg_cluster.available():
        sys.exit("needs Debian's PostgreSQL server binaries (and setpriv)")
    sections = set(args.sections.split(","))
    print(f"# bench_hosts ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})\n")
    if "serves" in sections:
        section_serves([int(s) for s in args.serves.split(",")], args.turns, args.queries)
    if "forget" in sections:
        section_forget(args.forgets)
    if "failover" in sections:
        section_failover()


if __name__ == "__main__":
    main()
