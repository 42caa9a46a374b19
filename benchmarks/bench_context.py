"""Context and recording benchmark: what an agent pays per turn, at any memory size.

For namespaces of 10k and 1M messages (built as bench_scale builds them) plus 5
rollings of real turns, on SQLite and PostgreSQL: median and p99 (ms) of
`context()` (the blocks an agent's prompt receives, derived from the database
at each call) and of `record_turn`. Run it against another checkout (PYTHONPATH)
to compare two versions in one table.

Usage: python benchmarks/bench_context.py [--sizes 10000,1000000] [--repeat 300]
       [--pg URL] [--no-pg]
"""

from __future__ import annotations

import argparse
import os
import tempfile

from bench_ingest import pg_schema_url  # same folder: the scripts share helpers
from bench_scale import build, texts, timed
from partner_memory import PartnerMemory
from partner_memory.store import open_store


def measure(database: str, size: int, repeat: int) -> dict[str, tuple[float, float]]:
    store = open_store(database)
    try:
        build(store, "agent", size, texts())
        with PartnerMemory(store, "agent", idle_timer=False) as memory:
            for day in range(5):
                for i in range(3):
                    memory.record_turn(f"day {day} turn {i}: the trip to Kyoto", "Noted.")
                memory.roll_now()
            counter = iter(range(10**9))
            return {
                "context()": timed(memory.context, repeat),
                "context_xml()": timed(memory.context_xml, repeat),
                "record_turn": timed(
                    lambda: memory.record_turn(f"hello {next(counter)}", "hi"), repeat
                ),
            }
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--pg", default=os.environ.get("PARTNER_MEMORY_TEST_PG", ""))
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    pg = "" if args.no_pg else (args.pg or "postgresql://postgres@127.0.0.1:5432/test")
    print("| backend | messages | operation | median ms | p99 ms |")
    print("| --- | --- | --- | --- | --- |")
    for size in sizes:
        with tempfile.TemporaryDirectory() as folder:
            targets = [("SQLite", os.path.join(folder, "memory.db"))]
            if pg:
                targets.append(("PostgreSQL", pg_schema_url(pg)))
            for backend, database in targets:
                for name, (p50, p99) in measure(database, size, args.repeat).items():
                    print(f"| {backend} | {size:,} | {name} | {p50:.3f} | {p99:.3f} |", flush=True)


if __name__ == "__main__":
    main()
