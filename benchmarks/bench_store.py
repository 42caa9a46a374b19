"""Store benchmark: append cost by unit size, slice reads, namespace open, peers as ratios.

Prints markdown tables for SQLite and PostgreSQL. For each unit size (messages
already stored in the unit) it times appending 10 messages:

- partner-memory `MemoryCore.update_memory_unit`;
- the reference's persistence scheme: the whole unit rewritten as one JSON
  file per update (what the Partner runtime does on save);
- the OpenAI Agents SDK's `SQLiteSession.add_items` (SQLite only);
- LangChain's `SQLChatMessageHistory.add_messages` (SQLite and PostgreSQL).

Usage: python benchmarks/bench_store.py [--sizes 1000,10000,100000] [--reps 200]
       [--pg postgresql://postgres@127.0.0.1:5432/test] [--no-pg]
Needs the `bench` extra for the peers; a missing peer is reported and skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from partner_memory.core import MemoryCore
from partner_memory.model import MemorySlice, Message
from partner_memory.store import UnitWrite, open_store
from partner_memory.store.contract.base import BulkWrite

BATCH = 10
BODY = (
    "We talked about the trip to Kyoto in April, the budget of about 200,000 yen, "
    "and that Mei does not eat seafood; the ryokan in Gion is booked for three nights."
)


def text(i: int) -> str:
    return f"[USER: Mei]:\n\n#{i} {BODY}"


@dataclass
class Timing:
    median_ms: float
    p99_ms: float


def measure(op: Callable[[int], None], reps: int, warmup: int = 10) -> Timing:
    """Median and p99 of `reps` calls, after `warmup` untimed ones (caches, prepared SQL)."""
    for i in range(warmup):
        op(-1 - i)
    samples = []
    for i in range(reps):
        start = time.perf_counter()
        op(i)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    p99 = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]
    return Timing(statistics.median(samples), p99)


# -- systems under test: each prepares a unit of `size` messages, returns an append op ---------


def partner_memory(database: str, size: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    store = open_store(database)
    namespace = f"bench-{size}-{uuid.uuid4().hex[:6]}"
    core = MemoryCore(store, namespace)
    session = core.memory_session_id
    prefill = [Message(role="user", content=text(i)) for i in range(size)]
    store.write_units(
        namespace,
        BulkWrite(session, [UnitWrite(session, 1, 0, prefill, [MemorySlice("s", 0, size, "", 1)])]),
    )

    def op(i: int) -> None:
        core.update_memory_unit(
            [Message(role="user", content=text(i)) for _ in range(BATCH)], f"summary {i}"
        )

    return op, store.close


def reference_json(directory: str, size: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    path = Path(directory) / f"memory-unit{uuid.uuid4()}.json"
    unit: dict[str, Any] = {
        "id": path.stem,
        "update_timestamp": 1,
        "conversation_messages": [{"role": "user", "content": text(i)} for i in range(size)],
        "memory_slices": [],
    }

    def op(i: int) -> None:
        messages = unit["conversation_messages"]
        start = len(messages)
        messages.extend({"role": "user", "content": text(i)} for _ in range(BATCH))
        unit["memory_slices"].append(
            {
                "id": str(uuid.uuid4()),
                "start_index": start,
                "end_index": len(messages),
                "summary": f"summary {i}",
                "created_timestamp": int(time.time() * 1000),
            }
        )
        unit["update_timestamp"] = int(time.time() * 1000)
        path.write_text(json.dumps(unit, ensure_ascii=False), "utf-8")

    return op, lambda: path.unlink(missing_ok=True)


def openai_sqlite_session(
    directory: str, size: int
) -> tuple[Callable[[int], None], Callable[[], None]]:
    from agents import SQLiteSession

    session = SQLiteSession(f"bench-{size}", str(Path(directory) / f"openai-{size}.db"))
    loop = asyncio.new_event_loop()
    for start in range(0, size, 1000):
        chunk = [
            {"role": "user", "content": text(i)} for i in range(start, min(size, start + 1000))
        ]
        loop.run_until_complete(session.add_items(chunk))  # type: ignore[arg-type]

    def op(i: int) -> None:
        items = [{"role": "user", "content": text(i)} for _ in range(BATCH)]
        loop.run_until_complete(session.add_items(items))  # type: ignore[arg-type]

    def close() -> None:
        session.close()
        loop.close()

    return op, close


def langchain_history(url: str, size: int) -> tuple[Callable[[int], None], Callable[[], None]]:
    from langchain_community.chat_message_histories import SQLChatMessageHistory
    from langchain_core.messages import HumanMessage

    history = SQLChatMessageHistory(
        session_id=f"bench-{size}-{uuid.uuid4().hex[:6]}", connection=url
    )
    for start in range(0, size, 1000):
        history.add_messages(
            [HumanMessage(content=text(i)) for i in range(start, min(size, start + 1000))]
        )

    def op(i: int) -> None:
        history.add_messages([HumanMessage(content=text(i)) for _ in range(BATCH)])

    return op, lambda: None


# -- reads -------------------------------------------------------------------------------------


def slice_read(database: str, size: int, reps: int) -> Timing:
    store = open_store(database)
    namespace = f"read-{uuid.uuid4().hex[:6]}"
    core = MemoryCore(store, namespace)
    session = core.memory_session_id
    prefill = [Message(role="user", content=text(i)) for i in range(size)]
    slices = [MemorySlice(f"s{k}", k, k + BATCH, "", 1) for k in range(0, size, BATCH)]
    store.write_units(namespace, BulkWrite(session, [UnitWrite(session, 1, 0, prefill, slices)]))
    step = max(1, len(slices) // reps)
    timing = measure(
        lambda i: core.read_slice_messages(session, slices[(i * step) % len(slices)].id), reps
    )
    store.close()
    return timing


def namespace_open(database: str, units: int, reps: int) -> tuple[Timing, Timing]:
    """(open store + namespace + first page, namespace + first page on an open store)."""
    store = open_store(database)
    namespace = f"open-{uuid.uuid4().hex[:6]}"
    core = MemoryCore(store, namespace)
    writes = [
        UnitWrite(
            f"unit-{u}",
            1_700_000_000_000 + u,
            0,
            [Message(role="user", content=text(i)) for i in range(BATCH)],
            [MemorySlice(f"unit-{u}-s", 0, BATCH, "summary", 1_700_000_000_000 + u)],
        )
        for u in range(units)
    ]
    store.write_units(namespace, BulkWrite(core.memory_session_id, writes))
    warm = measure(lambda _: MemoryCore(store, namespace, create=False).list_units(limit=20), reps)
    store.close()

    def cold(_: int) -> None:
        opened = open_store(database)
        MemoryCore(opened, namespace, create=False).list_units(limit=20)
        opened.close()

    return measure(cold, reps), warm


# -- driver ------------------------------------------------------------------------------------


def run_appends(
    title: str,
    systems: dict[str, Callable[[int], tuple[Callable[[int], None], Callable[[], None]]]],
    sizes: list[int],
    reps: int,
) -> None:
    results: dict[str, dict[int, Timing]] = {}
    for name, prepare in systems.items():
        results[name] = {}
        for size in sizes:
            try:
                op, close = prepare(size)
            except ImportError as exc:
                print(f"({name} skipped: {exc})")
                del results[name]
                break
            # the whole-file rewrite grows with the unit: fewer reps keep the run short
            n = reps if name != "reference JSON rewrite" or size < 50_000 else max(10, reps // 10)
            results[name][size] = measure(op, n)
            close()
    base = results["partner-memory"]
    header = " | ".join(f"{s:,} msgs: median / p99 ms" for s in sizes)
    print(f"\n### {title}: append {BATCH} messages to a unit of N messages\n")
    print(f"| system | {header} | N={sizes[-1]:,} vs N={sizes[0]:,} | median vs partner-memory |")
    print("|" + " --- |" * (len(sizes) + 3))
    for name, by_size in results.items():
        cells = " | ".join(f"{t.median_ms:.3f} / {t.p99_ms:.3f}" for t in by_size.values())
        growth = by_size[sizes[-1]].median_ms / by_size[sizes[0]].median_ms
        ratios = ", ".join(f"{by_size[s].median_ms / base[s].median_ms:.2f}x" for s in sizes)
        print(f"| {name} | {cells} | {growth:.2f}x | {ratios} |")


def pg_schema_url(server: str) -> str:
    import psycopg

    schema = f"pm_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in server else "?"
    return f"{server}{separator}options={quote(f'-csearch_path={schema}')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    warnings.simplefilter("ignore")  # peers' deprecation notices would drown the tables

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "partner.db")
        run_appends(
            "SQLite",
            {
                "partner-memory": lambda n: partner_memory(db, n),
                "reference JSON rewrite": lambda n: reference_json(tmp, n),
                "OpenAI Agents SQLiteSession": lambda n: openai_sqlite_session(tmp, n),
                "LangChain SQLChatMessageHistory": lambda n: langchain_history(
                    f"sqlite:///{tmp}/langchain-{n}.db", n
                ),
            },
            sizes,
            args.reps,
        )
        reads = {"SQLite": (slice_read(db, sizes[-1], args.reps), namespace_open(db, 1000, 50))}

        if not args.no_pg:
            pg = pg_schema_url(args.pg)
            lc_url = pg.replace("postgresql://", "postgresql+psycopg://", 1)
            run_appends(
                "PostgreSQL",
                {
                    "partner-memory": lambda n: partner_memory(pg, n),
                    "LangChain SQLChatMessageHistory": lambda n: langchain_history(lc_url, n),
                },
                sizes,
                args.reps,
            )
            reads["PostgreSQL"] = (
                slice_read(pg, sizes[-1], args.reps),
                namespace_open(pg, 1000, 50),
            )

    print("\n### Reads (partner-memory), median / p99 ms\n")
    print(
        f"| backend | one slice's {BATCH} messages, unit of {sizes[-1]:,}"
        " | namespace of 1,000 units + first page, store open"
        " | same, including opening the store (connect, schema check) |"
    )
    print("| --- | --- | --- | --- |")
    for backend, (read, (cold, warm)) in reads.items():
        print(
            f"| {backend} | {read.median_ms:.3f} / {read.p99_ms:.3f}"
            f" | {warm.median_ms:.3f} / {warm.p99_ms:.3f}"
            f" | {cold.median_ms:.3f} / {cold.p99_ms:.3f} |"
        )


if __name__ == "__main__":
    main()
