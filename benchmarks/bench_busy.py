"""What a turn costs on a busy machine: ours and a peer writing at the same time.

Each round starts `--burners` CPU-bound processes (a busy machine made on
purpose, so the figure repeats), then ours and the peer, each as `N` writer
processes on a database of its own, all starting at one instant and writing
turns for `--seconds`. Every writer records, per turn, its latency; and the CPU
time its process and its children (ours: the analysis worker) used over the
run. Printed per writer count: turns/s, p50 and p99 latency, CPU ms per turn,
for each system, and ours / the peer's with each round's range. Ours is the
whole service: rolling every 36 turns, offline summaries and the recall index.

`--cpus 0` pins every process (burners included) to those cores, as
`taskset -c 0` would: one core shared by all.

Usage: python benchmarks/bench_busy.py [--writers 1,8] [--burners 0,2]
       [--seconds 6] [--rounds 3] [--peer "OpenAI SQLiteSession"] [--pg URL]
       [--cpus 0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from writers import SYSTEMS, WriterFailed, _prepare

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from writers import SYSTEMS
from bench_busy import tree_cpu
system = SYSTEMS[sys.argv[2]]
target, namespace, start, stop = sys.argv[3], sys.argv[4], float(sys.argv[5]), float(sys.argv[6])
shared = system.open(target)
system.warm(shared)
turn, close = system.writer(shared, namespace)
while time.time() < start:
    time.sleep(0.002)
cpu = tree_cpu(os.getpid())
samples = []
i = 0
while time.time() < stop:
    t = time.perf_counter()
    turn(i)
    samples.append((time.perf_counter() - t) * 1000)
    i += 1
cpu = tree_cpu(os.getpid()) - cpu
close()
shared.close()
print(json.dumps({"samples": samples, "cpu": cpu}))
"""

BURN = "while True: pass"


def tree_cpu(pid: int) -> float:
    """CPU seconds (user and system) of `pid` and every process below it, from /proc."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += times.get(current, 0.0)
        todo += [p for p, parent in parents.items() if parent == current]
    return total


@dataclass
class Run:
    turns_per_s: float
    p50_ms: float
    p99_ms: float
    cpu_ms_per_turn: float


@dataclass(frozen=True)
class Shape:
    """What one round runs: how many writers of each system, for how long, where."""

    writers: int
    seconds: float
    backend: str
    pg: str
    folder: Path
    #: cores every process is pinned to (`taskset -c`), or None
    cpus: str | None = None

    def command(self, argv: list[str]) -> list[str]:
        return ["taskset", "-c", self.cpus, *argv] if self.cpus else argv

    def target(self) -> str:
        if self.backend == "sqlite":
            return str(self.folder / f"{uuid.uuid4().hex}.db")
        from bench_ingest import pg_schema_url

        return pg_schema_url(self.pg)


def one_round(names: list[str], shape: Shape) -> dict[str, Run]:
    """Every system's writers at once, on databases of their own."""
    targets = {name: shape.target() for name in names}
    for name in names:
        _prepare(SYSTEMS[name], targets[name])
    # every child imported and warm by then
    start = time.time() + 4.0 + 0.6 * shape.writers * len(names)
    stop = start + shape.seconds
    children: dict[str, list[subprocess.Popen[bytes]]] = {}
    for name in names:
        argv = [sys.executable, "-c", CHILD, str(HERE), name, targets[name]]
        children[name] = [
            subprocess.Popen(
                shape.command([*argv, f"w{w}", str(start), str(stop)]),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=ROOT,
            )
            for w in range(shape.writers)
        ]
    runs: dict[str, Run] = {}
    for name, started in children.items():
        reports = []
        for child in started:
            out, err = child.communicate(timeout=600)
            if child.returncode != 0:
                said = err.decode(errors="replace").strip().splitlines() or ["failed"]
                raise WriterFailed(f"{name}: {said[-1]}")
            reports.append(json.loads(out))
        samples = sorted(s for r in reports for s in r["samples"])
        cpu = sum(r["cpu"] for r in reports)
        runs[name] = Run(
            len(samples) / shape.seconds,
            statistics.median(samples),
            samples[min(len(samples) - 1, int(0.99 * len(samples)))],
            1000 * cpu / max(len(samples), 1),
        )
    return runs


def _ratios(rounds: list[dict[str, Run]], ours: str, peer: str) -> str:
    """Ours / the peer's turns/s, p99 and CPU per turn: median (range over rounds)."""

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"

    each = [r[ours].turns_per_s / r[peer].turns_per_s for r in rounds]
    p99 = [r[ours].p99_ms / r[peer].p99_ms for r in rounds]
    cpu = [r[ours].cpu_ms_per_turn / r[peer].cpu_ms_per_turn for r in rounds]
    return f"{cell(each)} | {cell(p99)} | {cell(cpu)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", default="1,8")
    parser.add_argument("--burners", default="0,2")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peer", default="OpenAI SQLiteSession")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--cpus", default="", help="pin every process to these cores: 0 or 0,1")
    args = parser.parse_args()
    names = ["partner-memory", args.peer]
    print(
        f"{args.backend}: ours and {args.peer} at the same time, {args.seconds:g} s a round,"
        f" median of {args.rounds} rounds; {os.cpu_count()} cores"
        + (f", every process pinned to {args.cpus}" if args.cpus else "")
        + "\n"
    )
    print("| burners | writers | system | turns/s | p50 ms | p99 ms | CPU ms/turn |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ratios: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        for burners in [int(b) for b in args.burners.split(",")]:
            pinned = Shape(0, 0, args.backend, args.pg, Path(folder), args.cpus or None)
            burning = [
                subprocess.Popen(pinned.command([sys.executable, "-c", BURN]))
                for _ in range(burners)
            ]
            try:
                for writers in [int(w) for w in args.writers.split(",")]:
                    shape = replace(pinned, writers=writers, seconds=args.seconds)
                    rounds = [one_round(names, shape) for _ in range(args.rounds)]
                    for name in names:
                        runs = [r[name] for r in rounds]
                        print(
                            f"| {burners} | {writers} | {name}"
                            f" | {statistics.median(r.turns_per_s for r in runs):,.0f}"
                            f" | {statistics.median(r.p50_ms for r in runs):.2f}"
                            f" | {statistics.median(r.p99_ms for r in runs):.2f}"
                            f" | {statistics.median(r.cpu_ms_per_turn for r in runs):.3f} |",
                            flush=True,
                        )
                    ratios.append(f"| {burners} | {writers} | {_ratios(rounds, *names)} |")
            finally:
                for burner in burning:
                    burner.kill()
                    burner.wait()
    print("\nours / peer, same round: median (range over rounds)\n")
    print("| burners | writers | turns/s | p99 | CPU per turn |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(ratios))


if __name__ == "__main__":
    main()
