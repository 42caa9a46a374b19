"""Pipeline benchmark: LoCoMo replay throughput, rolling overhead, and turn recording latency.

1. Ingest every conversation of shared/data/locomo-dev with the offline
   summariser: messages per second end to end, and per rolling the
   pipeline's own time (increment, store, context, trajectory) apart from
   compressing and summarising. Then one session of 60,000 messages (LoCoMo's
   turns over and over, 30 s apart, so one unit grows to 60,000 messages):
   ingest speed must not depend on the unit's size. Then 128 sessions of 100
   messages each, each its own namespace: per-session costs, next to the long
   session's rate. A warm-up replay first leaves the process as one that has
   been ingesting: imports done, the analysis worker running. Beside them, the same
   messages appended to OpenAI Agents' `SQLiteSession` one conversation per
   call, which stores them and does nothing else.
2. Live recording: `record_turn` in a loop while rollings run in the
   background with a summariser that takes 200 ms (standing in for an LLM):
   median and p99 of a turn, and of the turns recorded while a rolling was in
   flight - next to the peers' plain appends of the same two messages
   (OpenAI Agents `SQLiteSession`, LangChain `SQLChatMessageHistory`), which
   do no rolling at all.

Usage: python benchmarks/bench_ingest.py [--data DIR] [--turns 2000] [--long 60000]
                                        [--pg URL] [--no-pg]
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

from partner_memory.ingest import ReplayClock, Transcript, ingest, read_transcript
from partner_memory.memory import PartnerMemory
from partner_memory.model import Message
from partner_memory.recall.analyze import WORKER_MIN_MESSAGES
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


def replay_all(database: str, transcripts: list[Transcript]) -> dict[str, Any]:
    """Each transcript into its own namespace, as `partner-memory ingest` does it."""
    store = open_store(database)
    messages = rollings = units = 0
    pipeline_ms: list[float] = []
    marks: list[tuple[int, float]] = []  # (messages recorded so far, when)

    def progress(count: int) -> None:
        done = marks[-1][0] + count if marks else count
        marks.append((done, time.perf_counter()))

    started = time.perf_counter()
    for transcript in transcripts:
        clock = ReplayClock()
        with PartnerMemory(store, transcript.name, clock=clock, idle_timer=False) as memory:
            report = ingest(memory, transcript, clock, progress=progress)
        messages += report.recorded
        units += report.units
        rollings += report.totals.rollings
        pipeline_ms.append(report.totals.pipeline_ms / max(report.totals.rollings, 1))
    seconds = time.perf_counter() - started
    store.close()
    return {
        "messages": messages,
        "units": units,
        "rollings": rollings,
        "seconds": seconds,
        "per_second": messages / seconds,
        "pipeline_ms_per_rolling": statistics.mean(pipeline_ms),
        "first_tenth": _rate(marks, 0.0, 0.1),
        "last_tenth": _rate(marks, 0.9, 1.0),
    }


def _rate(marks: list[tuple[int, float]], begin: float, end: float) -> float:
    """Messages per second over a share of the replay (by messages recorded)."""
    total = marks[-1][0]
    inside = [(n, t) for n, t in marks if begin * total <= n <= end * total]
    if len(inside) < 2 or inside[-1][1] == inside[0][1]:
        return float("nan")
    return (inside[-1][0] - inside[0][0]) / (inside[-1][1] - inside[0][1])


def long_session(conversations: list[Transcript], count: int) -> Transcript:
    """`count` messages of one conversation: LoCoMo's turns in a loop, 30 s apart."""
    turns = [m for t in conversations for m in t.messages]
    start = 1_700_000_000_000
    messages = [
        Message(
            role=turns[i % len(turns)].role,
            content=turns[i % len(turns)].content,
            timestamp=start + i * 30_000,
            metadata=turns[i % len(turns)].metadata,
        )
        for i in range(count)
    ]
    return Transcript("long-session", "jsonl", messages, [f"message {i}" for i in range(count)])


def short_sessions(conversations: list[Transcript], sessions: int, each: int) -> list[Transcript]:
    """`sessions` sessions of `each` messages cut from `long_session`'s loop of turns."""
    loop = long_session(conversations, sessions * each)
    cut = [slice(n * each, (n + 1) * each) for n in range(sessions)]
    return [
        Transcript(f"short-{n}", "jsonl", loop.messages[part], loop.origins[part])
        for n, part in enumerate(cut)
    ]


def openai_bulk(directory: str, transcripts: list[Transcript]) -> dict[str, Any] | None:
    """The same messages into OpenAI Agents' SQLiteSession, one `add_items` per transcript."""
    try:
        from agents import SQLiteSession
    except ImportError as exc:
        print(f"(peer skipped: {exc})")
        return None
    loop = asyncio.new_event_loop()
    messages = 0
    started = time.perf_counter()
    for transcript in transcripts:
        session = SQLiteSession(transcript.name, str(Path(directory) / "openai-bulk.db"))
        items = [{"role": m.role, "content": m.content} for m in transcript.messages]
        loop.run_until_complete(session.add_items(items))  # type: ignore[arg-type]
        messages += len(items)
        session.close()
    seconds = time.perf_counter() - started
    loop.close()
    return {"messages": messages, "seconds": seconds, "per_second": messages / seconds}


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


def _fresh(database: str, tmp: str) -> str:
    """Another empty database of the same backend, so workloads do not share tables."""
    if database.startswith("postgresql://"):
        return pg_schema_url(database.split("?", maxsplit=1)[0])
    return str(Path(tmp) / f"{uuid.uuid4().hex[:8]}.db")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--long", type=int, default=60_000, help="messages of the long session")
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

        conversations = [read_transcript(path) for path in files]
        # warm up: one replay first, so one-time costs (imports, the stemmer, the first
        # store, the start of the analysis worker a process keeps once it has ingested
        # that many messages) are not counted as throughput; the first conversation's
        # turns only, so the others' are new to the summariser as they would be
        replay_all(
            str(Path(tmp) / "warm-up.db"),
            [long_session(conversations[:1], WORKER_MIN_MESSAGES)],
        )
        workloads = {
            f"{len(files)} LoCoMo conversations": conversations,
            f"one session of {args.long:,} messages": [long_session(conversations, args.long)],
            "128 sessions of 100 messages": short_sessions(conversations, 128, 100),
        }
        print(
            "\n### Replay (`ingest`), offline summariser, after a warm-up (the analysis"
            " worker running)\n"
        )
        print(
            "| backend | workload | messages | units | rollings | seconds | messages/s"
            " | vs LoCoMo | first / last tenth, messages/s | pipeline ms per rolling |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, database in backends.items():
            base = None
            for number, (workload, transcripts) in enumerate(workloads.items()):
                r = replay_all(database if number == 0 else _fresh(database, tmp), transcripts)
                base = base or r["per_second"]
                tenths = (
                    f"{r['first_tenth']:,.0f} / {r['last_tenth']:,.0f}"
                    if len(transcripts) == 1  # one unit growing: does its size slow it?
                    else "-"
                )
                print(
                    f"| {name} | {workload} | {r['messages']:,} | {r['units']:,}"
                    f" | {r['rollings']:,} | {r['seconds']:.2f} | {r['per_second']:,.0f}"
                    f" | {r['per_second'] / base:.2f}x | {tenths}"
                    f" | {r['pipeline_ms_per_rolling']:.3f} |"
                )
        for workload, transcripts in workloads.items():
            bulk = openai_bulk(tmp, transcripts)
            if bulk:
                print(
                    f"| SQLite | OpenAI Agents SQLiteSession.add_items, {workload} (stores only)"
                    f" | {bulk['messages']:,} | - | - | {bulk['seconds']:.2f}"
                    f" | {bulk['per_second']:,.0f} | - | - | - |"
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
