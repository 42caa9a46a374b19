"""LangGraph store benchmark: `PartnerMemoryStore` beside LangGraph's own stores.

For each store, with N items already in one namespace, it times (median and p99
over `--reps` calls): `put` of a new key, `put` over an existing key, `get`,
`search` without a query (a filter on a field), and `search(query=...)`. LangGraph's
stores are run without an embedding index (they need a model for one), so their
query search is a listing; ours is recall (words, meaning, dates). Ratios are ours /
peer on the same backend (< 1: ours is faster).

Usage: python benchmarks/bench_langgraph_store.py [--items 1000] [--reps 200]
       [--pg postgresql://postgres@127.0.0.1:5432/test] [--no-pg]
Needs the `langgraph` extra, and langgraph-checkpoint-sqlite / -postgres for the
peers (the `bench` extra); a missing peer is reported and skipped.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_ingest import pg_schema_url  # same folder: the scripts share helpers
from bench_store import measure
from partner_memory.integrations.langgraph import PartnerMemoryStore
from partner_memory.service import MemoryService

NAMESPACE = ("memories", "mei")
TOPICS = ["Kyoto in April", "the ryokan in Gion", "no seafood", "a budget of 200,000 yen"]


def value(i: int) -> dict[str, Any]:
    return {"text": f"note {i}: Mei talked about {TOPICS[i % len(TOPICS)]}", "kind": i % 7}


def timed(op: Callable[[int], object], reps: int) -> tuple[float, float]:
    taken = measure(op, reps, warmup=5)  # type: ignore[arg-type]  # results are dropped
    return taken.median_ms, taken.p99_ms


def run(store: Any, items: int, reps: int) -> dict[str, tuple[float, float]]:
    for i in range(items):
        store.put(NAMESPACE, f"k{i}", value(i))
    return {
        "put (new key)": timed(lambda i: store.put(NAMESPACE, f"new{i}", value(i)), reps),
        "put (same key)": timed(lambda i: store.put(NAMESPACE, "k1", value(i)), reps),
        "get": timed(lambda i: store.get(NAMESPACE, f"k{abs(i) % items}"), reps),
        "search (filter)": timed(lambda i: store.search(NAMESPACE, filter={"kind": 3}), reps),
        "search (query)": timed(
            lambda i: store.search(NAMESPACE, query="where is Mei staying in Kyoto?"), reps
        ),
    }


@contextmanager
def ours(url: str) -> Iterator[Any]:
    with MemoryService.open(url) as service:
        store = PartnerMemoryStore(memory=service)
        yield store
        store.close()


@contextmanager
def langgraph_sqlite(path: str) -> Iterator[Any]:
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(path) as store:
        store.setup()
        yield store


@contextmanager
def langgraph_postgres(url: str) -> Iterator[Any]:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(url) as store:
        store.setup()
        yield store


def table(title: str, results: dict[str, dict[str, tuple[float, float]]], peer: str) -> None:
    names = list(results)
    print(f"\n### {title}\n")
    print("| operation | " + " | ".join(f"{n} median / p99 ms" for n in names) + " | ours / peer |")
    print("| --- |" + " --- |" * (len(names) + 1))
    for op in results[names[0]]:
        cells = [f"{results[n][op][0]:.2f} / {results[n][op][1]:.2f}" for n in names]
        ratio = (
            f"{results[names[0]][op][0] / results[peer][op][0]:.2f}x" if peer in results else "-"
        )
        print(f"| {op} | " + " | ".join(cells) + f" | {ratio} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    print(f"{args.items} items in one namespace, {args.reps} calls each")
    with tempfile.TemporaryDirectory() as tmp:
        sqlite: dict[str, dict[str, tuple[float, float]]] = {}
        with ours(str(Path(tmp) / "ours.db")) as store:
            sqlite["partner-memory"] = run(store, args.items, args.reps)
        try:
            with langgraph_sqlite(str(Path(tmp) / "langgraph.db")) as store:
                sqlite["LangGraph SqliteStore"] = run(store, args.items, args.reps)
        except ImportError as exc:
            print(f"LangGraph SqliteStore skipped: {exc}")
        table("SQLite", sqlite, "LangGraph SqliteStore")
    if args.no_pg:
        return
    postgres: dict[str, dict[str, tuple[float, float]]] = {}
    with ours(pg_schema_url(args.pg)) as store:
        postgres["partner-memory"] = run(store, args.items, args.reps)
    try:
        with langgraph_postgres(pg_schema_url(args.pg)) as store:
            postgres["LangGraph PostgresStore"] = run(store, args.items, args.reps)
    except ImportError as exc:
        print(f"LangGraph PostgresStore skipped: {exc}")
    table("PostgreSQL", postgres, "LangGraph PostgresStore")


if __name__ == "__main__":
    main()
