"""Pipeline benchmark: LoCoMo replay throughput, rolling overhead, and turn recording latency.

1. Ingest every conversation of shared/data/locomo-dev with the offline
   summariser: messages per second end to end, and per rolling the
   pipeline's own time (increment, store, context, trajectory) apart from
   compressing and summarising.
2. Live recording: `record_turn` in a loop while rollings run in the
   background with a summariser that takes 200 ms (standing in for an LLM):
   median and p99 of a turn, and of the turns recorded while a rolling was in
   flight - next to the peers' plain appends of the same two messages
   (OpenAI Agents `SQLiteSession`, LangChain `SQLChatMessageHistory`), which
   do no rolling at all.

Usage: python benchmarks/bench_ingest.py [--data DIR] [--turns 2000] [--pg URL] [--no-pg]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from partner_memory.ingest import ReplayClock, ingest, read_transcript
from partner_memory.memory import PartnerMemory
from partner_memory.model import Message
from partner_memory.rolling import ExtractiveSummarizer, UsageMeter
from partner_memory.store import open_store

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo-dev"


def pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def pg_schema_url(server: str) -> str:
    import psycopg

    schema = f"pm_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{server}{'&' if '?' in server else '?'}options={quote(f'-csearch_path={schema}')}"


def replay_all(database: str, files: list[Path]) -> dict[str, Any]:
    store = open_store(database)
    messages = rollings = 0
    pipeline_ms: list[float] = []
    started = time.perf_counter()
    for path in files:
        transcript = read_transcript(path)
        clock = ReplayClock()
        with PartnerMemory(store, path.stem, clock=clock, idle_timer=False) as memory:
            report = ingest(memory, transcript, clock)
        messages += report.recorded
        rollings += report.totals.rollings
        pipeline_ms.append(report.totals.pipeline_ms / max(report.totals.rollings, 1))
    seconds = time.perf_counter() - started
    store.close()
    return {
        "messages": messages,
        "rollings": rollings,
        "seconds": seconds,
        "per_second": messages / seconds,
        "pipeline_ms_per_rolling": statistics.mean(pipeline_ms),
    }


class SlowSummarizer(ExtractiveSummarizer):
    """The offline summary after a 200 ms wait, standing in for an LLM call."""

    name = "slow"

    def summarize(self, messages: Sequence[Message], meter: UsageMeter) -> str:
        time.sleep(0.2)
        return super().summarize(messages, meter)


def live_turns(database: str, turns: int) -> dict[str, float]:
    store = open_store(database)
    all_ms: list[float] = []
    during_ms: list[float] = []
    with PartnerMemory(
        store, f"live-{uuid.uuid4().hex[:6]}", summarizers=[SlowSummarizer()], idle_timer=False
    ) as memory:
        for i in range(turns):
            rolling = memory.rolling._running.locked()  # a rolling is in flight right now
            began = time.perf_counter()
            memory.record_turn(f"question {i} about the trip", f"answer {i}: book early")
            spent = (time.perf_counter() - began) * 1000
            all_ms.append(spent)
            if rolling:
                during_ms.append(spent)
        rolled = memory.stats().rollings
    store.close()
    return {
        "median": statistics.median(all_ms),
        "p99": pct(all_ms, 0.99),
        "during_median": statistics.median(during_ms) if during_ms else float("nan"),
        "during_p99": pct(during_ms, 0.99) if during_ms else float("nan"),
        "during_n": len(during_ms),
        "rollings": rolled,
    }


def peer_turns(make: Callable[[], Callable[[int], None]], turns: int) -> dict[str, float] | None:
    try:
        op = make()
    except ImportError as exc:
        print(f"(peer skipped: {exc})")
        return None
    samples = []
    for i in range(turns):
        began = time.perf_counter()
        op(i)
        samples.append((time.perf_counter() - began) * 1000)
    return {"median": statistics.median(samples), "p99": pct(samples, 0.99)}


def openai_session(directory: str) -> Callable[[int], None]:
    from agents import SQLiteSession

    session = SQLiteSession("bench", str(Path(directory) / "openai.db"))
    loop = asyncio.new_event_loop()

    def op(i: int) -> None:
        items = [
            {"role": "user", "content": f"question {i} about the trip"},
            {"role": "assistant", "content": f"answer {i}: book early"},
        ]
        loop.run_until_complete(session.add_items(items))  # type: ignore[arg-type]

    return op


def langchain_history(url: str) -> Callable[[int], None]:
    from langchain_community.chat_message_histories import SQLChatMessageHistory
    from langchain_core.messages import AIMessage, HumanMessage

    history = SQLChatMessageHistory(session_id=uuid.uuid4().hex, connection=url)

    def op(i: int) -> None:
        history.add_messages(
            [HumanMessage(f"question {i} about the trip"), AIMessage(f"answer {i}: book early")]
        )

    return op


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    files = sorted(args.data.glob("conv-*.json"))
    if not files:
        raise SystemExit(f"no conv-*.json under {args.data}")

    with tempfile.TemporaryDirectory() as tmp:
        backends = {"SQLite": str(Path(tmp) / "ingest.db")}
        if not args.no_pg:
            backends["PostgreSQL"] = pg_schema_url(args.pg)

        print(f"\n### Replay of {len(files)} LoCoMo conversations, offline summariser\n")
        print("| backend | messages | rollings | seconds | messages/s | pipeline ms per rolling |")
        print("| --- | --- | --- | --- | --- | --- |")
        for name, database in backends.items():
            r = replay_all(database, files)
            print(
                f"| {name} | {r['messages']:,} | {r['rollings']} | {r['seconds']:.2f}"
                f" | {r['per_second']:,.0f} | {r['pipeline_ms_per_rolling']:.2f} |"
            )

        print(
            f"\n### Recording a turn ({args.turns:,} turns, rollings with a 200 ms summariser"
            " in the background), ms\n"
        )
        print(
            "| system | median | p99 | median while rolling | p99 while rolling"
            " | median vs partner-memory |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for name, database in backends.items():
            live = live_turns(database, args.turns)
            print(
                f"| partner-memory record_turn, {name} | {live['median']:.3f} | {live['p99']:.3f}"
                f" | {live['during_median']:.3f} | {live['during_p99']:.3f}"
                f" ({live['during_n']:,} turns, {live['rollings']} rollings) | 1.00x |"
            )
            base = live["median"]
            peers: dict[str, Callable[[], Callable[[int], None]]] = {}
            if name == "SQLite":
                peers["OpenAI Agents SQLiteSession.add_items"] = lambda: openai_session(tmp)
                peers["LangChain SQLChatMessageHistory.add_messages"] = lambda: langchain_history(
                    f"sqlite:///{tmp}/langchain.db"
                )
            else:
                url = database.replace("postgresql://", "postgresql+psycopg://", 1)
                peers["LangChain SQLChatMessageHistory.add_messages"] = lambda url=url: (
                    langchain_history(url)
                )
            for peer, make in peers.items():
                result = peer_turns(make, args.turns)
                if result:
                    print(
                        f"| {peer}, {name} | {result['median']:.3f} | {result['p99']:.3f}"
                        f" | - | - | {result['median'] / base:.2f}x |"
                    )


if __name__ == "__main__":
    main()
