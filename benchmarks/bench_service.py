"""Service benchmark: sharing one memory between processes, and many namespaces in one.

1. `record_turn` latency (median, p99) with 1 process on one namespace, 4
   processes on one namespace and 4 processes on 4 namespaces, SQLite and
   PostgreSQL, offline summaries (rollings happen every 36 turns), and the
   rollings per second the 4 processes achieve together. With
   `--baseline-src DIR` (the `src` of an earlier checkout) the single-process
   figure of that version is measured in the same run, side by side.
2. Threads and RSS of one process holding 10, 1,000 and 10,000 namespaces,
   each opened and given one turn.
3. Turns/s of 1, 2, 4 and 8 concurrent writers (threads of one process, or
   processes; each on its own namespace, or all on one), SQLite and
   PostgreSQL, with the OpenAI Agents SDK's SQLiteSession, LangChain's
   SQLChatMessageHistory and LangGraph's store beside ours in the same run, and
   our commits that wait for the disk (fsyncs) per acknowledged turn: writers
   that queue for a SQLite file share them (group commit), and the rollings,
   leases and index behind the callers wait for none. Ours is the whole service:
   its rollings (every 36 turns, offline summaries, recall index) run too.
   A run of 150 turns lasts a tenth of a second, so each figure is the median
   of `--rounds` rounds, the systems taking turns within each round.

Usage: python benchmarks/bench_service.py [--turns 400] [--pg URL] [--no-pg]
       [--namespaces 10,1000,10000] [--baseline-src DIR]
       [--sections sharing,namespaces,writers] [--writer-turns 150] [--writers 1,2,4,8]
       [--rounds 3]
Needs the `bench` extra for the peers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

from bench_ingest import pct, pg_schema_url  # same folder: the scripts share helpers
from writers import (
    SYSTEMS,
    Figures,
    System,
    WriterFailed,
    writer_processes,
    writer_threads,
)

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
from partner_memory import PartnerMemory, open_store
database, namespace, turns, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
memory = PartnerMemory(open_store(database), namespace, idle_timer=False, owns_store=True)
while time.time() < start:
    time.sleep(0.005)
samples = []
began = time.perf_counter()
for i in range(turns):
    t = time.perf_counter()
    memory.record_turn(f"question {i} about the trip", f"answer {i}: book early")
    samples.append((time.perf_counter() - t) * 1000)
memory.wait()
wall = time.perf_counter() - began
memory.close()
print(json.dumps({"samples": samples, "wall": wall}))
"""


def fresh(backend: str, pg: str, tmp: Path) -> str:
    if backend == "sqlite":
        return str(tmp / f"{uuid.uuid4().hex[:8]}.db")
    return pg_schema_url(pg)


def rollings(database: str) -> int:
    from partner_memory import open_store

    store = open_store(database, read_only=True)
    try:
        return sum(store.log_head(n.name) for n in store.list_namespaces())
    finally:
        store.close()


def run_processes(
    database: str, namespaces: list[str], turns: int, src: Path | None = None
) -> dict[str, float]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    start = time.time() + 3.0
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, database, ns, str(turns), str(start)],
            stdout=subprocess.PIPE,
            env=env,
            cwd=tempfile.gettempdir() if src is not None else ROOT,
        )
        for ns in namespaces
    ]
    samples: list[float] = []
    wall = 0.0
    for child in children:
        out, _ = child.communicate(timeout=600)
        if child.returncode != 0:
            raise SystemExit(f"benchmark child failed ({child.returncode})")
        report = json.loads(out)
        samples += report["samples"]
        wall = max(wall, report["wall"])
    return {
        "median": statistics.median(samples),
        "p99": pct(samples, 0.99),
        "rollings_per_s": rollings(database) / wall if src is None else float("nan"),
    }


def sharing(args: argparse.Namespace, tmp: Path) -> None:
    backends = ["sqlite"] + ([] if args.no_pg else ["postgres"])
    print(f"\nrecord_turn, {args.turns} turns per process (ms; rollings every 36 turns, offline)")
    print(
        f"{'backend':<9} {'setup':<28} {'median':>8} {'p99':>8} {'x 1 proc':>9} {'rollings/s':>11}"
    )
    for backend in backends:
        setups: list[tuple[str, list[str], Path | None]] = []
        if args.baseline_src:
            setups.append(("1 process (baseline src)", ["ns"], Path(args.baseline_src)))
        setups += [
            ("1 process, 1 namespace", ["ns"], None),
            ("4 processes, 1 namespace", ["ns"] * 4, None),
            ("4 processes, 4 namespaces", [f"ns{i}" for i in range(4)], None),
        ]
        single: float | None = None
        for label, namespaces, src in setups:
            figures = run_processes(fresh(backend, args.pg, tmp), namespaces, args.turns, src)
            if label.startswith("1 process, 1"):
                single = figures["median"]
            ratio = f"{figures['median'] / single:.2f}x" if single else "-"
            rate = figures["rollings_per_s"]
            rolled = "-" if math.isnan(rate) else f"{rate:.1f}"
            print(
                f"{backend:<9} {label:<28} {figures['median']:>8.3f} {figures['p99']:>8.3f}"
                f" {ratio:>9} {rolled:>11}"
            )


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def many_namespaces(args: argparse.Namespace, tmp: Path) -> None:
    from partner_memory import MemoryService, RollingSettings, open_store

    print("\none process holding many namespaces (each opened and given one turn)")
    print(f"{'backend':<9} {'namespaces':>10} {'threads':>8} {'RSS MB':>8} {'s to open':>10}")
    counts = [int(c) for c in args.namespaces.split(",")]
    backends = ["sqlite"] + ([] if args.no_pg else ["postgres"])
    for backend in backends:
        store = open_store(fresh(backend, args.pg, tmp))
        service = MemoryService(store, settings=RollingSettings(), owns_store=True)
        opened = 0
        began = time.perf_counter()
        for count in counts:
            while opened < count:
                service.memory(f"agent-{opened}").record_turn("hello", "hi")
                opened += 1
            service.wait()
            print(
                f"{backend:<9} {count:>10,} {threading.active_count():>8}"
                f" {rss_mb():>8.0f} {time.perf_counter() - began:>10.1f}"
            )
        service.close()


def writers(args: argparse.Namespace, tmp: Path) -> None:
    counts = [int(c) for c in args.writers.split(",")]
    backends = ["sqlite"] + ([] if args.no_pg else ["postgres"])
    print(
        f"\nconcurrent writers, {args.writer_turns} turns each: turns/s of all writers together"
        f" (a turn's median latency), median of {args.rounds} rounds; in each round the"
        " systems run one after another; ratios: of the medians (each round's range)"
    )
    for backend in backends:
        for mode, run in (("threads", writer_threads), ("processes", writer_processes)):
            for shared_ns in (False, True):
                where = "one namespace" if shared_ns else "own namespaces"
                print(f"\n### {backend}, {mode}, {where}\n")
                rounds, failed = _writer_rounds(
                    args, tmp, backend=backend, run=run, shared_ns=shared_ns, counts=counts
                )
                _writer_table(rounds, failed, counts)


#: A writers run: (system, database, writers, one namespace, turns) -> figures.
WriterRun = Callable[[System, str, int, bool, int], Figures]


def _writer_rounds(
    args: argparse.Namespace,
    tmp: Path,
    *,
    backend: str,
    run: WriterRun,
    shared_ns: bool,
    counts: list[int],
) -> tuple[dict[str, list[list[Figures]]], dict[tuple[str, int], str]]:
    """Per system and count of writers, each round's figures; and why a peer's runs
    failed (a peer that fails once is not run again at that count; ours stops it all)."""
    systems = [s for s in SYSTEMS.values() if backend in s.backends]
    rounds: dict[str, list[list[Figures]]] = {s.name: [] for s in systems}
    failed: dict[tuple[str, int], str] = {}
    for n in counts:
        for runs in rounds.values():
            runs.append([])
        for _ in range(args.rounds):
            for system in systems:
                if (system.name, n) in failed:
                    continue
                try:
                    figures = run(
                        system, fresh(backend, args.pg, tmp), n, shared_ns, args.writer_turns
                    )
                except WriterFailed as exc:
                    if system.name == "partner-memory":
                        raise SystemExit(str(exc)) from None
                    failed[system.name, n] = str(exc)
                    continue
                rounds[system.name][-1].append(figures)
    return rounds, failed


def _writer_table(
    rounds: dict[str, list[list[Figures]]],
    failed: dict[tuple[str, int], str],
    counts: list[int],
) -> None:
    print("| system | " + " | ".join(f"{n} writers" for n in counts) + " |")
    print("|" + " --- |" * (len(counts) + 1))
    medians = {
        name: [_median(per) if per else None for per in runs] for name, runs in rounds.items()
    }
    for name, figures in medians.items():
        row = " | ".join(
            "failed" if f is None else f"{f.turns_per_s:,.0f} ({f.median_ms:.2f} ms)"
            for f in figures
        )
        print(f"| {name} | {row} |")
    ours = [f for f in medians["partner-memory"] if f is not None]
    per_turn = " | ".join(
        "-" if f.syncs_per_turn is None else f"{f.syncs_per_turn:.2f}" for f in ours
    )
    print(f"| partner-memory fsyncs per turn | {per_turn} |")
    for name, theirs in medians.items():
        if name == "partner-memory":
            continue
        cells: list[str] = []
        for o, t, o_runs, t_runs in zip(
            ours, theirs, rounds["partner-memory"], rounds[name], strict=True
        ):
            if t is None:
                cells.append("-")
                continue
            each = [a.turns_per_s / b.turns_per_s for a, b in zip(o_runs, t_runs, strict=True)]
            cells.append(f"{o.turns_per_s / t.turns_per_s:.2f}x ({min(each):.2f}-{max(each):.2f})")
        print(f"| ours / {name} | {' | '.join(cells)} |", flush=True)
    for (name, n), why in failed.items():
        print(f"\n{name}, {n} writers, failed: {why}", flush=True)


def _median(runs: list[Figures]) -> Figures:
    """Each figure's median over the rounds."""
    syncs = [f.syncs_per_turn for f in runs if f.syncs_per_turn is not None]
    return Figures(
        statistics.median(f.turns_per_s for f in runs),
        statistics.median(syncs) if syncs else None,
        statistics.median(f.median_ms for f in runs),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--namespaces", default="10,1000,10000")
    parser.add_argument("--baseline-src", default=None)
    parser.add_argument("--sections", default="sharing,namespaces,writers")
    parser.add_argument("--writer-turns", type=int, default=150)
    parser.add_argument("--writers", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the writers section")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    warnings.simplefilter("ignore")  # peers' deprecation notices would drown the tables
    with tempfile.TemporaryDirectory() as tmp:
        if "sharing" in sections:
            sharing(args, Path(tmp))
        if "namespaces" in sections:
            many_namespaces(args, Path(tmp))
        if "writers" in sections:
            writers(args, Path(tmp))


if __name__ == "__main__":
    main()
