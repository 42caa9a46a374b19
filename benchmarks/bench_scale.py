"""Scale benchmark: no cost may grow with a namespace's size or the number of namespaces.

For namespaces of 10k, 100k and 1M messages (units of 100 messages and 5
slices, LoCoMo's turns over and over, built through the bare store's bulk
write) and for 10,000 namespaces of 100 messages, on SQLite and PostgreSQL:
median and p99 (ms) of a rolling of 40 new messages, opening a memory, the
first and the last page of `list_units`, reading a slice with its messages,
`context()`, recall (after a reindex, and the first search that loads the
index), and the wall time of the `units` and `namespaces` commands;
then bytes per message on disk. Then 20,000 turns recorded live into one
namespace: does recording slow with its history? Then 2,000 open/roll/close cycles of
`PartnerMemory` over one store: open connections, file descriptors and RSS
before and after. Beside them, OpenAI Agents' `SQLiteSession` holding the
same messages: bytes per message and `get_items(limit=20)`.

Usage: python benchmarks/bench_scale.py [--sizes 10000,100000,1000000]
       [--namespaces 10000] [--cycles 2000] [--repeat 30] [--turns 20000]
       [--pg URL] [--no-pg]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_ingest import DATA, pct, pg_schema_url  # same folder: the scripts share helpers
from partner_memory import Message, PartnerMemory
from partner_memory.ingest import read_transcript
from partner_memory.model import MemorySlice, new_id
from partner_memory.store import MemoryStore, UnitWrite, open_store
from partner_memory.store.contract.base import BulkWrite

ROOT = Path(__file__).resolve().parent.parent
UNIT_MESSAGES, UNIT_SLICES = 100, 5
#: Questions of the kind LoCoMo asks, for recall timings.
QUESTIONS = [
    "When did Caroline go to the LGBTQ support group?",
    "What does Melanie like to paint?",
    "Where did they go camping last summer?",
    "What books has Caroline read recently?",
    "How many children does Melanie have?",
]
START = 1_600_000_000_000


def texts() -> list[tuple[str, str]]:
    turns = [m for path in sorted(DATA.glob("conv-*.json")) for m in read_transcript(path).messages]
    return [(m.role, m.content) for m in turns]


def build(store: MemoryStore, namespace: str, count: int, corpus: list[tuple[str, str]]) -> None:
    """`count` messages in units of 100 with 5 slices each, 200 units per transaction."""
    store.ensure_namespace(namespace, new_id())
    units, done = [], 0
    while done < count:
        n = min(UNIT_MESSAGES, count - done)
        at = START + done * 30_000
        batch = [
            Message(*corpus[(done + i) % len(corpus)], timestamp=at + i * 30_000)  # type: ignore[arg-type]
            for i in range(n)
        ]
        step = max(1, n // UNIT_SLICES)
        slices = [
            MemorySlice(new_id(), s, min(n, s + step), f"summary of {s}", at + s * 30_000)
            for s in range(0, n, step)
        ]
        units.append(UnitWrite(new_id(), at + n * 30_000, 0, batch, slices))
        done += n
        if len(units) == 200 or done >= count:
            store.write_units(namespace, BulkWrite(units[-1].id, units))
            units = []


def timed(op: Callable[[], object], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        op()
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples), pct(samples, 0.99)


def cli_ms(database: str, args: list[str], repeat: int = 5) -> float:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "partner_memory", "--db", database, *args],
            check=True,
            capture_output=True,
        )
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples)


def measure(database: str, namespace: str, repeat: int) -> dict[str, tuple[float, float]]:
    store = open_store(database)
    out: dict[str, tuple[float, float]] = {}
    counter = iter(range(10**9))

    def rolling() -> None:
        i = next(counter)
        memory.record_messages(
            [Message("user" if j % 2 else "assistant", f"new {i}-{j}") for j in range(40)]
        )
        memory.roll_now()

    with PartnerMemory(store, namespace, idle_timer=False) as memory:
        core = memory.core
        total = core.list_units(limit=1).total
        unit = core.list_units(limit=1, offset=total // 2).units[0].id
        one = core.list_slices(unit)[0].id
        out["rolling of 40 messages"] = timed(rolling, repeat)
        out["first page of units"] = timed(lambda: core.list_units(limit=20), repeat)
        out["last page of units"] = timed(
            lambda: core.list_units(limit=20, offset=max(0, total - 20)), repeat
        )
        out["a slice and its messages"] = timed(
            lambda: (core.get_memory_slice(unit, one), core.read_slice_messages(unit, one)), repeat
        )
        out["context()"] = timed(memory.context, repeat)
        # built by the bulk write, so indexed by a reindex; the first search then loads
        # the namespace's index into memory, later ones only catch it up
        began = time.perf_counter()
        memory.service.reindex(namespace)
        out["reindex (once)"] = ((time.perf_counter() - began) * 1000, float("nan"))
        began = time.perf_counter()
        memory.recall("summary of the trip", activate=False)
        out["first recall (loads the index)"] = ((time.perf_counter() - began) * 1000, float("nan"))
        questions = iter(QUESTIONS * (repeat // len(QUESTIONS) + 1))
        out["recall, k=10"] = timed(lambda: memory.recall(next(questions), activate=False), repeat)

    def opening() -> None:
        PartnerMemory(store, namespace, idle_timer=False).close()

    out["opening a memory"] = timed(opening, repeat)
    store.close()
    out["CLI units"] = (cli_ms(database, ["-n", namespace, "units"]), float("nan"))
    out["CLI namespaces"] = (cli_ms(database, ["namespaces"]), float("nan"))
    return out


def history(database: str, turns: int) -> tuple[float, float]:
    """`record_turn` medians (ms) over the first and the last 1,000 of `turns` turns
    recorded live into one namespace, rolling as they go: does a namespace's history
    (rolled window rows, a growing unit) slow recording?"""
    store = open_store(database)
    samples = []
    with PartnerMemory(store, "live", idle_timer=False) as memory:
        for i in range(turns):
            began = time.perf_counter()
            memory.record_turn(f"question {i} about the trip", f"answer {i}: book early")
            samples.append((time.perf_counter() - began) * 1000)
    store.close()
    return statistics.median(samples[:1000]), statistics.median(samples[-1000:])


def bytes_per_message(database: str) -> float:
    """The database's size over the messages it holds (units and windows)."""
    counted = "SELECT (SELECT COUNT(*) FROM messages) + (SELECT COUNT(*) FROM trajectory)"
    if database.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(database) as conn:
            size = conn.execute(
                "SELECT SUM(pg_total_relation_size(c.oid)) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            ).fetchone()
            count = conn.execute(counted).fetchone()
        return float(size[0]) / int(count[0]) if size and count else float("nan")
    import sqlite3

    with sqlite3.connect(database) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (count,) = conn.execute(counted).fetchone()
    return Path(database).stat().st_size / int(count)


def cycles(database: str, count: int) -> dict[str, float]:
    """Open/roll/close `count` memories over one store: what is held before and after."""
    store = open_store(database)

    def held() -> tuple[int, int, float]:
        conns = getattr(store, "open_connections", None)
        if conns is None:
            conns = store._pool.get_stats().get("pool_size", -1)  # type: ignore[attr-defined]
        status = Path("/proc/self/status").read_text()
        rss = int(status.split("VmRSS:")[1].split()[0]) / 1024
        return conns, len(os.listdir("/proc/self/fd")), rss

    def one(i: int) -> None:
        with PartnerMemory(store, f"cycle-{i % 10}", idle_timer=False) as memory:
            memory.record_messages([Message("user", f"q{i}"), Message("assistant", f"a{i}")])
            memory.roll_now()

    for i in range(50):
        one(i)
    before = held()
    for i in range(count):
        one(i)
    after = held()
    store.close()
    return {
        "connections": before[0],
        "connections after": after[0],
        "fds": before[1],
        "fds after": after[1],
        "rss MB": before[2],
        "rss MB after": after[2],
    }


def peer(directory: str, count: int, corpus: list[tuple[str, str]], repeat: int) -> Any:
    try:
        from agents import SQLiteSession
    except ImportError as exc:
        print(f"(peer skipped: {exc})")
        return None
    path = Path(directory) / f"openai-{count}.db"
    session = SQLiteSession("big", str(path))
    loop = asyncio.new_event_loop()
    items = [{"role": r, "content": c} for r, c in (corpus[i % len(corpus)] for i in range(count))]
    for start in range(0, count, 10_000):
        loop.run_until_complete(session.add_items(items[start : start + 10_000]))  # type: ignore[arg-type]
    median, p99 = timed(lambda: loop.run_until_complete(session.get_items(limit=20)), repeat)
    session.close()
    loop.close()
    return {"bytes": path.stat().st_size / count, "page": (median, p99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--namespaces", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--turns", type=int, default=20_000, help="live turns into one namespace")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    sizes = [int(s) for s in args.sizes.split(",")]
    corpus = texts()
    with tempfile.TemporaryDirectory() as tmp:
        backends: dict[str, Callable[[], str]] = {
            "SQLite": lambda: str(Path(tmp) / f"{uuid.uuid4().hex[:8]}.db")
        }
        if not args.no_pg:
            backends["PostgreSQL"] = lambda: pg_schema_url(args.pg)
        for name, fresh in backends.items():
            print(f"\n### {name}: one namespace of N messages (median / p99, ms)\n")
            results: dict[str, dict[str, tuple[float, float]]] = {}
            disk: dict[str, float] = {}
            indexed: dict[str, float] = {}
            for size in sizes:
                database = fresh()
                store = open_store(database)
                began = time.perf_counter()
                build(store, "big", size, corpus)
                store.close()
                print(f"(built {size:,} messages in {time.perf_counter() - began:.1f} s)")
                disk[f"{size:,}"] = bytes_per_message(database)  # the memory itself
                results[f"{size:,}"] = measure(database, "big", args.repeat)
                indexed[f"{size:,}"] = bytes_per_message(database)  # and its recall rows
            database = fresh()
            store = open_store(database)
            began = time.perf_counter()
            for n in range(args.namespaces):
                build(store, f"ns-{n:05d}", 100, corpus)
            store.close()
            label = f"{args.namespaces:,} x 100"
            print(f"(built {label} in {time.perf_counter() - began:.1f} s)")
            disk[label] = bytes_per_message(database)
            results[label] = measure(database, "ns-00042", args.repeat)
            indexed[label] = float("nan")  # one namespace of 10,000 reindexed: not comparable
            columns = list(results)
            print("\n| operation | " + " | ".join(columns) + f" | {columns[-2]} vs {columns[0]} |")
            print("| --- " * (len(columns) + 2) + "|")
            for op in results[columns[0]]:
                cells = [results[c][op] for c in columns]
                shown = [f"{m:.0f}" if math.isnan(p) else f"{m:.2f} / {p:.2f}" for m, p in cells]
                ratio = cells[-2][0] / cells[0][0] if cells[0][0] else float("nan")
                print(f"| {op} | " + " | ".join(shown) + f" | {ratio:.2f}x |")
            print("| bytes per message | " + " | ".join(f"{disk[c]:.0f}" for c in columns) + " | |")
            print(
                "| bytes per message, with the recall index | "
                + " | ".join(
                    "-" if math.isnan(indexed[c]) else f"{indexed[c]:.0f}" for c in columns
                )
                + " | |"
            )
            if name == "SQLite":
                peers = [peer(tmp, size, corpus, args.repeat) for size in sizes]
                if all(peers):
                    print(
                        "| OpenAI Agents SQLiteSession: bytes per message | "
                        + " | ".join(f"{p['bytes']:.0f}" for p in peers)
                        + " | - | |"
                    )
                    print(
                        "| OpenAI Agents SQLiteSession: get_items(limit=20) | "
                        + " | ".join(f"{p['page'][0]:.2f} / {p['page'][1]:.2f}" for p in peers)
                        + " | - | |"
                    )
            first, last = history(fresh(), args.turns)
            print(
                f"\nrecord_turn live, {args.turns:,} turns into one namespace ({name}): median"
                f" {first:.3f} ms over the first 1,000, {last:.3f} ms over the last 1,000"
                f" ({last / first:.2f}x)"
            )
            held = cycles(fresh(), args.cycles)
            print(
                f"\n{args.cycles:,} open/roll/close cycles over one store ({name}): connections"
                f" {held['connections']} -> {held['connections after']}, descriptors"
                f" {held['fds']} -> {held['fds after']}, RSS {held['rss MB']:.0f} ->"
                f" {held['rss MB after']:.0f} MB"
            )


if __name__ == "__main__":
    main()
