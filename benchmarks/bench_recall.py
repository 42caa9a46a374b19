"""Recall at scale: one namespace of 100k and 1M messages, on SQLite and PostgreSQL.

The namespace is LoCoMo's turns over and over (units of 100 messages, built
through the bare store's bulk write, see bench_scale.py). Measured: the
reindex (analysis and vectors of every message), the first recall of a
process (which loads the namespace's index), then recall p50/p99 (ms, k=10)
over LoCoMo's questions, through the whole `PartnerMemory.recall` (state
check, window, search, reading the hits). Beside it in the same run, on the
same messages: SQLite FTS5 in one table ordered by `bm25()` (the obvious
design), with the same questions as OR-queries of their words. Then bytes per
message on disk without and with the recall rows. Also how many of the top
10 scores the pruning of common words leaves as exact scoring has them (in
memory, words only; compared by score, as the repeated corpus ties).

Usage: python benchmarks/bench_recall.py [--sizes 100000,1000000] [--pg URL] [--no-pg]
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import partner_memory.recall.index as recall_index
from bench_ingest import DATA, pct, pg_schema_url  # same folder: the scripts share helpers
from bench_scale import build, bytes_per_message, texts
from partner_memory import PartnerMemory
from partner_memory.recall.analyze import terms
from partner_memory.store import open_store


def questions() -> list[str]:
    asked = []
    for path in sorted(DATA.glob("conv-*.json")):
        for qa in json.loads(path.read_text("utf-8"))["qa"]:
            if qa.get("category") in (1, 2, 3, 4):
                asked.append(str(qa["question"]))
    return asked[::4]  # ~190 questions


def timed(op: Callable[[str], object], asked: list[str]) -> tuple[float, float]:
    samples = []
    for question in asked:
        began = time.perf_counter()
        op(question)
        samples.append((time.perf_counter() - began) * 1000)
    return statistics.median(samples), pct(samples, 0.99)


def ours(
    database: str, size: int, corpus: list[tuple[str, str]], asked: list[str]
) -> dict[str, str]:
    store = open_store(database)
    began = time.perf_counter()
    build(store, "big", size, corpus)
    built = time.perf_counter() - began
    store.close()
    row = {"build s": f"{built:.0f}", "bytes/msg": f"{bytes_per_message(database):.0f}"}
    store = open_store(database)
    with PartnerMemory(store, "big", idle_timer=False) as memory:
        began = time.perf_counter()
        memory.service.reindex("big")
        row["reindex s"] = f"{time.perf_counter() - began:.1f}"
        began = time.perf_counter()
        memory.recall("warm up", activate=False)
        row["first recall s"] = f"{time.perf_counter() - began:.1f}"
        p50, p99 = timed(lambda q: memory.recall(q, activate=False), asked)
        row["recall p50 / p99 ms"] = f"{p50:.1f} / {p99:.1f}"
        index = memory.service.recall._held["big"].index  # the loaded index, for the check
        same = []  # by score: the corpus repeats, so equal messages tie in any order
        exact_below = recall_index.EXACT_BELOW
        for question in asked:
            words = terms(question)
            recall_index.EXACT_BELOW = 10**12
            exact = [round(h.score, 4) for h in index.search(words, k=10)]
            recall_index.EXACT_BELOW = exact_below
            pruned = [round(h.score, 4) for h in index.search(words, k=10)]
            kept = sum(a == b for a, b in zip(exact, pruned, strict=False))
            same.append(kept / max(1, len(exact)))
        row["top-10 scores kept by pruning"] = f"{100 * statistics.mean(same):.1f} %"
    store.close()
    row["bytes/msg with recall"] = f"{bytes_per_message(database):.0f}"
    return row


def fts5(tmp: str, size: int, corpus: list[tuple[str, str]], asked: list[str]) -> dict[str, str]:
    database = str(Path(tmp) / f"fts-{uuid.uuid4().hex[:8]}.db")
    with sqlite3.connect(database) as db:
        db.execute("CREATE VIRTUAL TABLE docs USING fts5(content, tokenize='porter')")
        db.executemany(
            "INSERT INTO docs (content) VALUES (?)",
            ((corpus[i % len(corpus)][1],) for i in range(size)),
        )
    db = sqlite3.connect(database)
    sql = "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT 10"

    def search(question: str) -> object:
        words = [w for w in re.findall(r"\w+", question.lower()) if len(w) > 2]
        return db.execute(sql, (" OR ".join(f'"{w}"' for w in words) or '""',)).fetchall()

    p50, p99 = timed(search, asked)
    db.close()
    return {"recall p50 / p99 ms": f"{p50:.1f} / {p99:.1f}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    sizes = [int(s) for s in args.sizes.split(",")]
    corpus, asked = texts(), questions()
    with tempfile.TemporaryDirectory() as tmp:
        backends: dict[str, Callable[[], str]] = {
            "SQLite": lambda: str(Path(tmp) / f"{uuid.uuid4().hex[:8]}.db")
        }
        if not args.no_pg:
            backends["PostgreSQL"] = lambda: pg_schema_url(args.pg)
        rows: list[tuple[str, int, dict[str, str]]] = []
        for name, fresh in backends.items():
            for size in sizes:
                rows.append((name, size, ours(fresh(), size, corpus, asked)))
                print(f"({name} {size:,}: {rows[-1][2]})", flush=True)
        for size in sizes:
            rows.append(("SQLite FTS5, one table, bm25()", size, fts5(tmp, size, corpus, asked)))
        keys = list(dict.fromkeys(k for _, _, row in rows for k in row))
        print(f"\n{len(asked)} LoCoMo questions, k=10\n")
        print("| system | messages | " + " | ".join(keys) + " |")
        print("| --- " * (len(keys) + 2) + "|")
        for name, size, row in rows:
            print(f"| {name} | {size:,} | " + " | ".join(row.get(k, "-") for k in keys) + " |")
        ours_at = {(n, s): r for n, s, r in rows}
        for size in sizes:
            mine = ours_at.get(("SQLite", size), {}).get("recall p50 / p99 ms")
            peer = ours_at.get(("SQLite FTS5, one table, bm25()", size), {}).get(
                "recall p50 / p99 ms"
            )
            if mine and peer:
                ratio = float(mine.split(" / ")[0]) / float(peer.split(" / ")[0])
                print(f"\nSQLite {size:,}: our recall p50 is {ratio:.2f}x FTS5's")


if __name__ == "__main__":
    main()
