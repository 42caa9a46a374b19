"""Where one writer's time goes on SQLite: ours by layer, beside OpenAI's SQLiteSession.

1. Turns/s of one writer thread (150 turns, a fresh file each run, warmed
   alike for every system: `writers.WARM_TURNS`, past which our process runs
   its analysis worker), the variants taking turns within each round, so
   that each round's ratio to SQLiteSession compares runs made under the
   same load:
   - partner-memory, the whole service (rollings every 30 turns, offline
     summaries, the recall index);
   - the same without the recall index (a service that registers no
     `RecallIndexer`: its rollings and summaries only);
   - the same without rollings (`max_messages` beyond the run: the turns only);
   - the store's append alone (`append_trajectory` as `record_turn` calls it:
     the statements and the group commit, none of the layers above);
   - OpenAI SQLiteSession.
   Ratios are the median of the rounds' ratios, with the middle half of them:
   a run lasts a tenth of a second, and one round's ratio can be off by half.
2. A turn's mean latency by its place in the 30-turn cycle between two
   count triggers (turn 0: the turn that fires one): what a rolling costs
   the turns that run beside it.

Usage: python benchmarks/bench_single_writer.py [--rounds 16] [--turns 150] [--cycles 20]
Needs the `bench` extra (for SQLiteSession).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from partner_memory import MemoryService, Message, RollingSettings, markers, open_store
from partner_memory.recall.indexer import RecallIndexer
from partner_memory.rolling.consumers import DurableConsumer
from partner_memory.store.contract.base import AppendOptions
from partner_memory.trajectory import structured_ids
from writers import SYSTEMS, Ours, Shared, System, Turn, answer, question, writer_threads

_DEFAULTS = RollingSettings()
#: Turns between two count triggers: a rolling keeps the newest 1/6 of the window
#: (12 of 72 messages), and 30 turns of two messages fill it again.
CYCLE_TURNS = (_DEFAULTS.max_messages - _DEFAULTS.max_messages // _DEFAULTS.retain_divisor) // 2
#: The turn whose messages first fill the window (the 36th).
FIRST_TRIGGER = _DEFAULTS.max_messages // 2 - 1
#: Cycles one run of the second table records (a fresh file each run).
CYCLES_PER_RUN = 20
#: Places shown one by one; the rest of the cycle is shown as one mean.
SHOWN = 12


class _Unindexed(MemoryService):
    """A service whose rollings feed no recall index."""

    def register_consumer(self, consumer: DurableConsumer) -> Future[None]:
        if not isinstance(consumer, RecallIndexer):
            return super().register_consumer(consumer)
        skipped: Future[None] = Future()
        skipped.set_result(None)
        return skipped


class WithoutIndex(Ours):
    name = "without the recall index"

    def open(self, target: str) -> Shared:
        service = _Unindexed(open_store(target), owns_store=True)
        return Shared(service, service.close)


class WithoutRollings(Ours):
    name = "without rollings"

    def open(self, target: str) -> Shared:
        settings = RollingSettings(max_messages=1_000_000)
        service = MemoryService(open_store(target), owns_store=True, settings=settings)
        return Shared(service, service.close)


class StoreAppend(Ours):
    name = "the store's append alone"

    def writer(self, shared: Shared, namespace: str) -> tuple[Turn, Callable[[], None]]:
        store = shared.state.store
        shared.state.memory(namespace)  # the namespace exists

        def turn(i: int) -> None:
            now = int(time.time() * 1000)
            messages = [
                Message(role="user", content=markers.user_text("USER", question(i)), timestamp=now),
                Message(
                    role="assistant", content=markers.assistant_text(answer(i))[0], timestamp=now
                ),
            ]
            store.append_trajectory(
                namespace,
                messages,
                AppendOptions(
                    last_interaction=now,
                    structured=structured_ids(messages),
                    drop_structured=True,
                    fresh_ids=True,
                ),
            )

        return turn, lambda: None


def layers(args: argparse.Namespace, tmp: Path) -> None:
    peer = SYSTEMS["OpenAI SQLiteSession"]
    systems: list[System] = [
        SYSTEMS["partner-memory"],
        WithoutIndex(),
        WithoutRollings(),
        StoreAppend(),
        peer,
    ]
    runs: dict[str, list[float]] = {s.name: [] for s in systems}
    for round_ in range(args.rounds):
        for system in systems:
            target = str(tmp / f"{round_}-{id(system)}.db")
            runs[system.name].append(
                writer_threads(system, target, 1, False, args.turns).turns_per_s
            )
    print(
        f"\none writer, {args.turns} turns a run, {args.rounds} rounds: turns/s (median),"
        f" and the rounds' ratios to {peer.name} (median; middle half)\n"
    )
    print(f"| system | turns/s | / {peer.name} |")
    print("| --- | --- | --- |")
    theirs = runs[peer.name]
    for name, figures in runs.items():
        ratios = sorted(a / b for a, b in zip(figures, theirs, strict=True))
        q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
        print(
            f"| {name} | {statistics.median(figures):,.0f} |"
            f" {statistics.median(ratios):.2f}x ({q1:.2f}-{q3:.2f}) |"
        )


def cycle(args: argparse.Namespace, tmp: Path) -> None:
    """Mean latency by place in the rolling cycle, over `args.cycles` cycles of each run."""
    system = SYSTEMS["partner-memory"]
    by_place: list[list[float]] = [[] for _ in range(CYCLE_TURNS)]
    runs = max(1, args.cycles // CYCLES_PER_RUN)
    for run in range(runs):
        shared = system.open(str(tmp / f"cycle-{run}.db"))
        system.warm(shared)
        turn, close = system.writer(shared, "cycle")
        for i in range(CYCLES_PER_RUN * CYCLE_TURNS):
            began = time.perf_counter()
            turn(i)
            by_place[(i - FIRST_TRIGGER) % CYCLE_TURNS].append((time.perf_counter() - began) * 1000)
        close()
        shared.close()
    means = [statistics.mean(v) for v in by_place]
    usual = statistics.median(means)
    print(
        f"\na turn's mean latency (ms) by its place from a count trigger,"
        f" {runs * CYCLES_PER_RUN} cycles; the usual turn: {usual:.2f} ms\n"
    )
    places = " | ".join(str(k) for k in range(SHOWN))
    print(f"| turns from the trigger | {places} | {SHOWN}-{CYCLE_TURNS - 1} |")
    print("|" + " --- |" * (SHOWN + 2))
    rest = statistics.mean(means[SHOWN:])
    print("| mean ms | " + " | ".join(f"{m:.2f}" for m in means[:SHOWN]) + f" | {rest:.2f} |")
    extra = sum(m - usual for m in means)
    print(f"\nwhat a rolling adds to the turns beside it: {extra:.1f} ms a cycle")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        layers(args, Path(tmp))
        cycle(args, Path(tmp))


if __name__ == "__main__":
    main()
