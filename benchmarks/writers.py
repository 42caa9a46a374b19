"""Concurrent writers for `bench_service.py`: turns/s of 1-8 writers, ours beside peers.

A system opens what one process shares (a store, an engine, a pool) and gives
each writer a `turn(i)` that records one exchange - a user message and the
reply - durably. Writers are threads of one process or processes of their own,
each on its own namespace (session) or all on one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Turns each system records before it is timed: past partner-memory's five first
#: rollings (LIVE_WORKER_MIN_MESSAGES, 300 rolled messages), which start its worker.
WARM_TURNS = 190
Turn = Callable[[int], None]


def question(i: int) -> str:
    return f"question {i}: where do we stay in Kyoto in April?"


def answer(i: int) -> str:
    return f"answer {i}: the ryokan in Gion, three nights, no seafood for Mei"


@dataclass
class Shared:
    """What one process's writers of a system share, and how to close it."""

    state: Any
    close: Callable[[], None]


class WriterFailed(Exception):
    """A system's writer raised, or its process failed: a peer's run is reported as
    failed, ours stops the benchmark."""


class System:
    name = ""
    backends: tuple[str, ...] = ("sqlite", "postgres")

    def open(self, target: str) -> Shared:
        raise NotImplementedError

    def writer(self, shared: Shared, namespace: str) -> tuple[Turn, Callable[[], None]]:
        raise NotImplementedError

    def syncs(self, shared: Shared) -> int | None:
        del shared
        return None

    def warm(self, shared: Shared) -> None:
        """Create the schema, load what the first turns would, and record as much as a
        service that has run a while (outside the timing): every system's file, and its
        write-ahead log, are then as old as the others'."""
        turn, close = self.writer(shared, "warm-up")
        for i in range(WARM_TURNS):
            turn(-1 - i)
        close()


class Ours(System):
    name = "partner-memory"

    def open(self, target: str) -> Shared:
        from partner_memory import MemoryService, open_store

        service = MemoryService(open_store(target), owns_store=True)
        return Shared(service, service.close)

    def writer(self, shared: Shared, namespace: str) -> tuple[Turn, Callable[[], None]]:
        memory = shared.state.memory(namespace)
        return lambda i: memory.record_turn(question(i), answer(i)), lambda: None

    def syncs(self, shared: Shared) -> int | None:
        return int(shared.state.store.commit_counts.syncs)

    def warm(self, shared: Shared) -> None:
        """Past a few rollings: the recall index's embedding model is loaded and, as in a
        service process that has rolled before, its analysis worker is running."""
        from partner_memory.recall.analysis_worker import started_workers

        super().warm(shared)
        shared.state.wait()
        for worker in started_workers():
            worker.wait_ready(60)


class OpenAISession(System):
    name = "OpenAI SQLiteSession"
    backends = ("sqlite",)

    def open(self, target: str) -> Shared:
        return Shared(target, lambda: None)

    def writer(self, shared: Shared, namespace: str) -> tuple[Turn, Callable[[], None]]:
        from agents import SQLiteSession

        session = SQLiteSession(namespace, shared.state)
        loop = asyncio.new_event_loop()

        def turn(i: int) -> None:
            items = [
                {"role": "user", "content": question(i)},
                {"role": "assistant", "content": answer(i)},
            ]
            loop.run_until_complete(session.add_items(items))  # type: ignore[arg-type]

        def close() -> None:
            session.close()
            loop.close()

        return turn, close


class LangChainHistory(System):
    name = "LangChain SQLChatMessageHistory"

    def open(self, target: str) -> Shared:
        from sqlalchemy import create_engine

        url = target.replace("postgresql://", "postgresql+psycopg://", 1)
        engine = create_engine(url if "://" in url else f"sqlite:///{url}", pool_size=8)
        return Shared(engine, engine.dispose)

    def writer(self, shared: Shared, namespace: str) -> tuple[Turn, Callable[[], None]]:
        from langchain_community.chat_message_histories import SQLChatMessageHistory
        from langchain_core.messages import AIMessage, HumanMessage

        history = SQLChatMessageHistory(session_id=namespace, connection=shared.state)

        def turn(i: int) -> None:
            history.add_messages([HumanMessage(question(i)), AIMessage(answer(i))])

        return turn, lambda: None


class LangGraphStore(System):
    name = "LangGraph store (2 puts)"

    def open(self, target: str) -> Shared:
        if "://" not in target:
            from langgraph.store.sqlite import SqliteStore

            conn = sqlite3.connect(target, check_same_thread=False, isolation_level=None)
            sqlite_store = SqliteStore(conn)
            sqlite_store.setup()
            return Shared(sqlite_store, conn.close)
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(
            target,
            max_size=8,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        )
        pg_store = PostgresStore(pool)  # type: ignore[arg-type]
        pg_store.setup()
        return Shared(pg_store, pool.close)

    def writer(self, shared: Shared, namespace: str) -> tuple[Turn, Callable[[], None]]:
        store = shared.state
        where = ("conversations", namespace)

        def turn(i: int) -> None:
            store.put(where, f"{i}-user-{os.getpid()}", {"role": "user", "content": question(i)})
            store.put(where, f"{i}-reply-{os.getpid()}", {"role": "ai", "content": answer(i)})

        return turn, lambda: None


SYSTEMS: dict[str, System] = {
    s.name: s for s in (Ours(), OpenAISession(), LangChainHistory(), LangGraphStore())
}


@dataclass
class Figures:
    turns_per_s: float
    #: commits that waited for the disk (fsyncs), per acknowledged turn
    syncs_per_turn: float | None
    #: one turn's median latency, over every writer's turns
    median_ms: float


def _prepare(system: System, target: str) -> None:
    """Create the schema once, before writer processes race to do it."""
    shared = system.open(target)
    system.warm(shared)
    shared.close()


def writer_threads(
    system: System, target: str, writers: int, shared_ns: bool, turns: int
) -> Figures:
    shared = system.open(target)
    system.warm(shared)
    start = threading.Barrier(writers + 1)
    errors: list[BaseException] = []
    samples: list[float] = []

    def work(w: int) -> None:
        turn, close = system.writer(shared, "shared" if shared_ns else f"own-{w}")
        try:
            start.wait()
            for i in range(turns):
                began = time.perf_counter()
                turn(i)
                samples.append((time.perf_counter() - began) * 1000)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    before = system.syncs(shared)
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    after = system.syncs(shared)
    shared.close()
    if errors:
        raise WriterFailed(f"{system.name}: {errors[0]!r}")
    done = writers * turns
    per_turn = None if before is None or after is None else (after - before) / done
    return Figures(done / wall, per_turn, statistics.median(samples))


CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from writers import SYSTEMS
system = SYSTEMS[sys.argv[2]]
target, namespace, turns, start = sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
shared = system.open(target)
system.warm(shared)
turn, close = system.writer(shared, namespace)
before = system.syncs(shared)
while time.time() < start:
    time.sleep(0.002)
samples = []
began = time.perf_counter()
for i in range(turns):
    t = time.perf_counter()
    turn(i)
    samples.append((time.perf_counter() - t) * 1000)
wall = time.perf_counter() - began
after = system.syncs(shared)
close()
shared.close()
print(json.dumps({"wall": wall, "samples": samples,
                  "syncs": None if before is None else after - before}))
"""


def writer_processes(
    system: System, target: str, writers: int, shared_ns: bool, turns: int
) -> Figures:
    _prepare(system, target)
    start = time.time() + 3.0 + 0.5 * writers  # every child imported and opened by then
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                CHILD,
                str(Path(__file__).parent),
                system.name,
                target,
                "shared" if shared_ns else f"own-{w}",
                str(turns),
                str(start),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        for w in range(writers)
    ]
    reports, failures = [], []
    for child in children:
        out, err = child.communicate(timeout=900)
        if child.returncode != 0:
            said = err.decode(errors="replace").strip().splitlines() or [f"exit {child.returncode}"]
            failures.append(said[-1])
        else:
            reports.append(json.loads(out))
    if failures:
        raise WriterFailed(f"{system.name}: a writer process failed: {failures[0]}")
    wall = max(r["wall"] for r in reports)  # all began at `start`
    done = writers * turns
    syncs = [r["syncs"] for r in reports]
    per_turn = None if None in syncs else sum(syncs) / done
    samples = [s for r in reports for s in r["samples"]]
    return Figures(done / wall, per_turn, statistics.median(samples))
