"""Recall at scale: one big namespace (10k / 100k / 1M messages), and many small ones.

The namespace is LoCoMo's turns over and over (units of 100 messages, built
through the bare store's bulk write, see bench_scale.py), indexed by
`reindex` (terms and vectors of every message). A first search builds this
host's index (tantivy, on disk beside the database). Then a *new process*
opens the service and is timed: its first recall (opening the index), recall
p50/p99 over LoCoMo's questions (ms, k=10, through the whole
`PartnerMemory.recall`: state check, window, search, reading the hits), and
its resident memory. Bytes per message: the database's, and the index's.

Beside it in the same run, on the same texts, as ratios: tantivy alone (one
document per message, its English stemmer, OR of the question's words), bm25s
(scipy sparse, loaded from its saved files) and SQLite FTS5 (one table ordered
by `bm25()`), each with its first search after opening and its p50.

`--tenants N`: N namespaces of 1,000 messages, every one searched once (their
indexes built), then a new process asks questions spread uniformly over all
of them, and the same questions on 10 of them: p50/p99 of each and the ratio.

Usage: python benchmarks/bench_recall.py [--sizes 10000,100000,1000000] [--pg URL]
       [--no-pg] [--tenants 1000]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

from bench_ingest import DATA, pct, pg_schema_url  # same folder: the scripts share helpers
from bench_scale import build, bytes_per_message, texts
from partner_memory import MemoryService, RollingSettings
from partner_memory.recall.replicas import RecallIndexSettings
from partner_memory.store import open_store

HERE = Path(__file__).resolve().parent


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


def resident_mb(kind: str = "VmRSS") -> float:
    """This process's resident memory: all of it (VmRSS), or the part no file backs
    (RssAnon: what the process holds; RssFile is mapped index and database pages, the
    kernel's to drop)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{kind}:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _service(database: str) -> MemoryService:
    settings = RollingSettings(idle_check_interval_s=0)
    return MemoryService.open(database, settings=settings)


# -- the new process ---------------------------------------------------------------------


def probe(database: str, spec: str) -> None:
    """In a fresh process: the first recall, then the questions, then resident memory.
    `spec` is a namespace, or "tenants:N:hot" / "tenants:N:uniform"."""
    asked = questions()
    baseline = resident_mb()
    with _service(database) as service:
        if spec.startswith("tenants:"):
            _, count, mode = spec.split(":")
            names = [f"t{i}" for i in range(int(count))]
            rng = random.Random(7)
            pool = names[:10] if mode == "hot" else names
            picks = [rng.choice(pool) for _ in range(len(asked) * 3)]
            samples = []
            for name, question in zip(picks, asked * 3, strict=True):
                began = time.perf_counter()
                service.memory(name).recall(question, activate=False)
                samples.append((time.perf_counter() - began) * 1000)
            result = {"p50": statistics.median(samples), "p99": pct(samples, 0.99)}
        else:
            memory = service.memory(spec)
            began = time.perf_counter()
            memory.recall("where did she go on holiday", activate=False)
            first = time.perf_counter() - began
            p50, p99 = timed(lambda q: memory.recall(q, activate=False), asked)
            result = {"first": first, "p50": p50, "p99": p99}
        result["rss"] = resident_mb()
        result["rss_added"] = result["rss"] - baseline
        result["anon"] = resident_mb("RssAnon")
    print(json.dumps(result), flush=True)


def in_new_process(database: str, spec: str) -> dict[str, float]:
    # the build's gigabytes of dirty pages are written back first: timed, the probe
    # would otherwise share the disk with that writeback for tens of seconds
    os.sync()
    done = subprocess.run(
        [sys.executable, str(HERE / "bench_recall.py"), "--probe", database, spec],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE,
    )
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


# -- ours ---------------------------------------------------------------------------------


def ours(database: str, size: int, corpus: list[tuple[str, str]]) -> dict[str, str]:
    store = open_store(database)
    began = time.perf_counter()
    build(store, "big", size, corpus)
    row = {"build s": f"{time.perf_counter() - began:.0f}"}
    store.close()
    with _service(database) as service:
        began = time.perf_counter()
        service.reindex("big")
        row["reindex s"] = f"{time.perf_counter() - began:.1f}"
        began = time.perf_counter()
        service.memory("big").recall("warm up", activate=False)  # builds this host's index
        row["index build s"] = f"{time.perf_counter() - began:.1f}"
        home = service.recall.replicas.home
    probed = in_new_process(database, "big")
    row["first recall s"] = f"{probed['first']:.3f}"
    row["p50 / p99 ms"] = f"{probed['p50']:.1f} / {probed['p99']:.1f}"
    row["RSS MB (added)"] = f"{probed['rss']:.0f} ({probed['rss_added']:.0f})"
    row["of it anonymous MB"] = f"{probed['anon']:.0f}"
    row["db bytes/msg"] = f"{bytes_per_message(database):.0f}"
    if home is not None:
        row["index bytes/msg"] = f"{directory_bytes(home) / size:.0f}"
    return row


def tenants(database: str, count: int, corpus: list[tuple[str, str]]) -> dict[str, str]:
    store = open_store(database)
    for i in range(count):
        build(store, f"t{i}", 1000, corpus[(i * 1000) % len(corpus) :] + corpus)
    store.close()
    with _service(database) as service:
        began = time.perf_counter()
        for i in range(count):
            service.reindex(f"t{i}")
            service.memory(f"t{i}").recall("warm up", activate=False)
        prepared = time.perf_counter() - began
    hot = in_new_process(database, f"tenants:{count}:hot")
    uniform = in_new_process(database, f"tenants:{count}:uniform")
    return {
        "prepare s": f"{prepared:.0f}",
        "hot p50 / p99 ms": f"{hot['p50']:.1f} / {hot['p99']:.1f}",
        "uniform p50 / p99 ms": f"{uniform['p50']:.1f} / {uniform['p99']:.1f}",
        "uniform / hot p50": f"{uniform['p50'] / hot['p50']:.2f}x",
        "RSS MB uniform (anonymous)": f"{uniform['rss']:.0f} ({uniform['anon']:.0f})",
    }


# -- peers, on the same texts -------------------------------------------------------------


def _words(question: str) -> list[str]:
    return [w for w in re.findall(r"\w+", question.lower()) if len(w) > 2]


def _measured(
    search: Callable[[str], object], began: float, asked: list[str], index_bytes: float
) -> dict[str, str]:
    """A peer's first search since `began` (its opening), then its p50/p99."""
    search("where did she go on holiday")
    first = time.perf_counter() - began
    p50, p99 = timed(search, asked)
    return {
        "first recall s": f"{first:.3f}",
        "p50 / p99 ms": f"{p50:.1f} / {p99:.1f}",
        "index bytes/msg": f"{index_bytes:.0f}",
    }


def tantivy_alone(
    tmp: str, size: int, corpus: list[tuple[str, str]], asked: list[str]
) -> dict[str, str]:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", tokenizer_name="en_stem")
    builder.add_integer_field("id", stored=True)
    schema = builder.build()
    path = Path(tmp) / f"tantivy-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    index = tantivy.Index(schema, path=str(path))
    writer = index.writer(200_000_000, 2)
    for i in range(size):
        writer.add_document(tantivy.Document(body=corpus[i % len(corpus)][1], id=i))
    writer.commit()
    writer.wait_merging_threads()
    began = time.perf_counter()
    opened = tantivy.Index.open(str(path))

    def search(question: str) -> object:
        words = _words(question)
        query = opened.parse_query(" OR ".join(words) or "nothing", ["body"])
        return opened.searcher().search(query, 10).hits

    return _measured(search, began, asked, directory_bytes(path) / size)


def bm25s_alone(
    tmp: str, size: int, corpus: list[tuple[str, str]], asked: list[str]
) -> dict[str, str]:
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # its import turns on DEBUG
    texts_ = [corpus[i % len(corpus)][1] for i in range(size)]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(texts_, stopwords="en", show_progress=False), show_progress=False
    )
    path = Path(tmp) / f"bm25s-{uuid.uuid4().hex[:8]}"
    retriever.save(str(path))
    began = time.perf_counter()
    loaded = bm25s.BM25.load(str(path), mmap=True)

    def search(question: str) -> object:
        tokens = bm25s.tokenize([question], stopwords="en", show_progress=False)
        return loaded.retrieve(tokens, k=10, show_progress=False)

    return _measured(search, began, asked, directory_bytes(path) / size)


def fts5(tmp: str, size: int, corpus: list[tuple[str, str]], asked: list[str]) -> dict[str, str]:
    database = str(Path(tmp) / f"fts-{uuid.uuid4().hex[:8]}.db")
    with sqlite3.connect(database) as db:
        db.execute("CREATE VIRTUAL TABLE docs USING fts5(content, tokenize='porter')")
        db.executemany(
            "INSERT INTO docs (content) VALUES (?)",
            ((corpus[i % len(corpus)][1],) for i in range(size)),
        )
    began = time.perf_counter()
    db = sqlite3.connect(database)
    sql = "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT 10"

    def search(question: str) -> object:
        words = _words(question)
        return db.execute(sql, (" OR ".join(f'"{w}"' for w in words) or '""',)).fetchall()

    search("where did she go on holiday")
    first = time.perf_counter() - began
    p50, p99 = timed(search, asked)
    db.close()
    return {"first recall s": f"{first:.3f}", "p50 / p99 ms": f"{p50:.1f} / {p99:.1f}"}


def _table(rows: list[tuple[str, str, dict[str, str]]]) -> None:
    keys = list(dict.fromkeys(k for _, _, row in rows for k in row))
    print("| system | messages | " + " | ".join(keys) + " |")
    print("| --- " * (len(keys) + 2) + "|")
    for name, size, row in rows:
        print(f"| {name} | {size} | " + " | ".join(row.get(k, "-") for k in keys) + " |")


def _p50(row: dict[str, str]) -> float:
    return float(row["p50 / p99 ms"].split(" / ")[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--tenants", type=int, default=0)
    parser.add_argument("--probe", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.probe:
        probe(*args.probe)
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    corpus, asked = texts(), questions()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CACHE_HOME"] = tmp  # PostgreSQL's indexes: under the run's directory
        assert RecallIndexSettings.from_env().directory is None, "unset PARTNER_MEMORY_RECALL_INDEX"
        backends: dict[str, Callable[[], str]] = {
            "SQLite": lambda: str(Path(tmp) / f"{uuid.uuid4().hex[:8]}.db")
        }
        if not args.no_pg:
            backends["PostgreSQL"] = lambda: pg_schema_url(args.pg)
        rows: list[tuple[str, str, dict[str, str]]] = []
        for size in sizes:
            for name, fresh in backends.items():
                rows.append((f"partner-memory, {name}", f"{size:,}", ours(fresh(), size, corpus)))
                print(f"({rows[-1]})", flush=True)
            for name, peer in (
                ("tantivy alone", tantivy_alone),
                ("bm25s (mmap)", bm25s_alone),
                ("SQLite FTS5, bm25()", fts5),
            ):
                rows.append((name, f"{size:,}", peer(tmp, size, corpus, asked)))
                print(f"({rows[-1]})", flush=True)
        print(f"\n{len(asked)} LoCoMo questions, k=10; ours measured in a new process\n")
        _table(rows)
        at = {(n, s): r for n, s, r in rows}
        for size in sizes:
            mine = at.get(("partner-memory, SQLite", f"{size:,}"))
            for peer in ("tantivy alone", "bm25s (mmap)", "SQLite FTS5, bm25()"):
                theirs = at.get((peer, f"{size:,}"))
                if mine and theirs:
                    print(f"{size:,}: our p50 is {_p50(mine) / _p50(theirs):.2f}x {peer}'s")
        if args.tenants:
            many: list[tuple[str, str, dict[str, str]]] = []
            for name, fresh in backends.items():
                many.append(
                    (name, f"{args.tenants:,} x 1,000", tenants(fresh(), args.tenants, corpus))
                )
                print(f"({many[-1]})", flush=True)
            print(f"\nmany namespaces, {len(asked) * 3} questions each way\n")
            _table(many)


if __name__ == "__main__":
    main()
