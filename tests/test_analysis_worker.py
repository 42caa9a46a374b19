"""The recall analysis worker: a second process making exactly the rows this one would.

Real child processes throughout: the worker is started, killed and orphaned
as it would be in use, and an ingest through it is compared, row by row,
with an ingest that keeps the analysis in its own process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from partner_memory.cli import app
from partner_memory.ingest import ReplayClock, ingest, read_transcript
from partner_memory.memory import PartnerMemory
from partner_memory.model import LogEntry, Message
from partner_memory.recall import analysis_worker
from partner_memory.recall.analysis_worker import (
    HAND_OVER_MIN_MESSAGES,
    LIVE_WORKER_MIN_MESSAGES,
    AnalysisWorker,
    close_workers,
    running_worker,
    shared_worker,
    summary_elsewhere,
)
from partner_memory.recall.analyze import PREFETCH_BATCH, WORKER_MIN_MESSAGES, RecallAnalysis
from partner_memory.recall.embed import EmbeddingSettings, StaticEmbedder
from partner_memory.rolling.consumers import PreparedWork
from partner_memory.rolling.llm import UsageMeter
from partner_memory.rolling.summarize import ExtractiveSummarizer
from partner_memory.service import MemoryService
from partner_memory.store import open_store
from tests.conftest import ManualClock
from tests.helpers import LOCOMO_DIR, needs_locomo

ROOT = Path(__file__).resolve().parent.parent
#: Generous: the worker loads the model, on a machine that may be busy.
READY_S = 120.0
STATIC = ("static", 128)


@pytest.fixture(autouse=True)
def _fresh_workers() -> Iterator[None]:
    close_workers()
    yield
    close_workers()


def _messages() -> list[Message]:
    said = [
        "Caroline: I went to the LGBTQ support group yesterday, it was powerful.",
        "我们下周去京都看红叶，记得提前订酒店。",
        "",
        "ok",
        "Numbers 42 and 2023, and a date: 7 May 2023. " * 40,
    ]
    return [
        Message(
            role="user" if i % 2 == 0 else "assistant",
            content=text,
            timestamp=1_683_000_000_000 + i * 60_000,
            metadata={"speaker": "Caroline"} if i == 0 else {},
        )
        for i, text in enumerate(said)
    ]


def _ready(worker: AnalysisWorker) -> AnalysisWorker:
    assert worker.wait_ready(READY_S), "the analysis worker did not load its model"
    return worker


@pytest.mark.parametrize("spec", [STATIC, ("none",)])
def test_the_worker_makes_the_rows_made_here(spec: tuple[object, ...]) -> None:
    here = RecallAnalysis(StaticEmbedder() if spec == STATIC else None)
    worker = _ready(shared_worker(spec))
    messages = _messages()
    future = worker.submit(messages)
    assert future is not None
    assert future.result(timeout=READY_S) == here.rows(messages)
    assert worker.answered == 1


def test_rows_later_within_bulk_or_past_live_work_and_only_when_allowed() -> None:
    messages = _messages()
    analysis = RecallAnalysis(StaticEmbedder())
    assert analysis.rows_later(messages) is None  # live work, far below the threshold
    assert running_worker(STATIC) is None
    with analysis.bulk():
        _ready(shared_worker(STATIC))
        later = analysis.rows_later(messages)
        assert later is not None
        assert later() == analysis.rows(messages)
    assert analysis.rows_later(messages) is None  # live, and too short to hand over
    rolled = [*messages, *(_read_back(m, m.content + " again") for m in messages)]
    assert len(rolled) >= HAND_OVER_MIN_MESSAGES
    later = analysis.rows_later(rolled)  # live work uses the worker that runs
    assert later is not None
    assert later() == analysis.rows(rolled)
    kept = RecallAnalysis(StaticEmbedder(), worker=False)
    with kept.bulk():
        assert kept.rows_later(messages) is None
    assert kept.rows_later(messages) is None


def test_small_bulk_work_starts_no_worker_but_uses_a_running_one() -> None:
    messages = _messages()
    analysis = RecallAnalysis(StaticEmbedder())
    with analysis.bulk(WORKER_MIN_MESSAGES - 1):
        assert running_worker(STATIC) is None  # not worth its start
        assert analysis.rows_later(messages) is None
    with analysis.bulk(WORKER_MIN_MESSAGES):
        worker = running_worker(STATIC)
        assert worker is not None
        _ready(worker)
    with analysis.bulk(1):
        later = analysis.rows_later(messages)  # started already: used
        assert later is not None
        assert later() == analysis.rows(messages)


def test_short_bulk_jobs_that_add_up_start_the_worker() -> None:
    """Many short sessions pay the worker's start once, as one long session does."""
    analysis = RecallAnalysis(StaticEmbedder())
    half = WORKER_MIN_MESSAGES // 2
    with analysis.bulk(half):
        assert running_worker(STATIC) is None
    # the inner job is a part of the outer one: not counted again
    with analysis.bulk(WORKER_MIN_MESSAGES - half - 1), analysis.bulk(WORKER_MIN_MESSAGES):
        assert running_worker(STATIC) is None
    with analysis.bulk(1):  # the process's bulk work reaches WORKER_MIN_MESSAGES
        assert running_worker(STATIC) is not None


def _read_back(message: Message, content: str | None = None) -> Message:
    """The message as the store returns it: equal, but another object."""
    text = message.content if content is None else content
    return Message.stored(
        message.id, message.role, "".join(list(text)), message.timestamp, dict(message.metadata)
    )


def test_prefetched_rows_go_to_the_same_messages_only() -> None:
    messages = _messages()
    here = RecallAnalysis(StaticEmbedder(), worker=False)
    analysis = RecallAnalysis(StaticEmbedder())
    assert not analysis.prefetch(messages)  # not bulk work: nothing to start them in
    with analysis.bulk():
        worker = _ready(shared_worker(STATIC))
        before = worker.answered
        assert analysis.prefetch(messages)
        later = analysis.rows_later([_read_back(m) for m in messages])
        assert later is not None
        assert later() == here.rows(messages)
        assert worker.answered == before + 1  # the prefetch's batch; none asked for again
        # stored with other content (or asked for twice): made anew, for what is stored
        assert analysis.prefetch(messages)
        changed = [_read_back(messages[0], "something else entirely"), *messages[1:]]
        later = analysis.rows_later(changed)
        assert later is not None
        assert later() == here.rows(changed)
    before = worker.answered
    with analysis.bulk():  # what a bulk prefetched and nobody took ends with it
        assert analysis.prefetch(messages[:1])
    with analysis.bulk():
        later = analysis.rows_later(messages[:1])
        assert later is not None
        assert later() == here.rows(messages[:1])
    assert worker.answered == before + 2  # the prefetch, then a batch of its own


def test_prefetch_stops_while_too_many_rows_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("partner_memory.recall.analyze.PREFETCH_HELD", 3)
    messages = _messages()
    analysis = RecallAnalysis(StaticEmbedder())
    with analysis.bulk():
        _ready(shared_worker(STATIC))
        assert analysis.prefetch(messages[:3])
        assert not analysis.prefetch(messages[3:])  # three rows wait to be taken
        later = analysis.rows_later(messages[:3])
        assert later is not None
        assert later() == analysis.rows(messages[:3])
        assert analysis.prefetch(messages[3:])  # taken: room again


def _jsonl(path: Path, count: int) -> str:
    path.write_text(
        "".join(
            f'{{"role": "user", "content": "note {i} of {path.stem}", "timestamp": {i}}}\n'
            for i in range(count)
        )
    )
    return str(path)


def test_an_ingest_of_several_files_is_one_bulk_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files too small to start the worker each, worth it together, start it."""
    monkeypatch.setattr("partner_memory.recall.analyze.WORKER_MIN_MESSAGES", 30)
    files = [_jsonl(tmp_path / f"part{n}.jsonl", 20) for n in range(2)]
    runner = CliRunner()
    alone = runner.invoke(app, ["ingest", files[0], "--db", str(tmp_path / "a.db"), "--json"])
    assert alone.exit_code == 0, alone.output
    assert running_worker(STATIC) is None
    both = runner.invoke(app, ["ingest", *files, "--db", str(tmp_path / "b.db"), "--json"])
    assert both.exit_code == 0, both.output
    assert running_worker(STATIC) is not None


def test_a_killed_worker_leaves_the_rows_to_this_process(caplog: pytest.LogCaptureFixture) -> None:
    messages = _messages()
    analysis = RecallAnalysis(StaticEmbedder())
    with analysis.bulk():
        worker = _ready(shared_worker(STATIC))
        process = worker._process
        assert process is not None
        process.kill()
        process.wait()
        # asked before or after the worker is seen gone: the rows come either way
        later = analysis.rows_later(messages)
        made = later() if later is not None else analysis.rows(messages)
        assert made == RecallAnalysis(StaticEmbedder(), worker=False).rows(messages)
        deadline = time.monotonic() + READY_S
        while analysis.rows_later(messages) is not None:  # the reader sees the pipe end
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert "its worker failed" in caplog.text


_ORPHAN = """
import sys, time
from partner_memory.recall.analysis_worker import shared_worker
worker = shared_worker(("none",))
assert worker.wait_ready(120)
print(worker._process.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")  # exited, waiting for whoever adopted it to reap it


def test_the_worker_ends_with_its_parent() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _ORPHAN], cwd=ROOT, stdout=subprocess.PIPE)
    assert parent.stdout is not None
    worker_pid = int(parent.stdout.readline())
    assert not _gone(worker_pid)
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    deadline = time.monotonic() + READY_S
    while not _gone(worker_pid):
        assert time.monotonic() < deadline, "the worker outlived its killed parent"
        time.sleep(0.05)


def _index_rows(database: str) -> list[tuple[object, ...]]:
    store = open_store(database)
    try:
        with store._transaction(write=False) as cur:  # type: ignore[attr-defined]
            cur.execute(
                "SELECT position, speaker, timestamp, terms, vector FROM recall_docs"
                " ORDER BY position"
            )
            return [tuple(row) for row in cur.fetchall()]
    finally:
        store.close()


def _ingested(database: str, *, worker: bool) -> None:
    transcript = read_transcript(LOCOMO_DIR / "conv-26.json")
    clock = ReplayClock()
    settings = EmbeddingSettings(analysis_worker=worker)
    with PartnerMemory(
        open_store(database),
        "replay",
        clock=clock,
        idle_timer=False,
        owns_store=True,
        embeddings=settings,
    ) as memory:
        ingest(memory, transcript, clock)


@needs_locomo
def test_an_ingest_through_the_worker_indexes_what_one_without_it_does(tmp_path: Path) -> None:
    _ready(shared_worker(STATIC))
    through, without = str(tmp_path / "through.db"), str(tmp_path / "without.db")
    _ingested(through, worker=True)
    # every row was started ahead of the replay, in batches of PREFETCH_BATCH messages
    replayed = len(read_transcript(LOCOMO_DIR / "conv-26.json").messages)
    assert shared_worker(STATIC).answered == -(-replayed // PREFETCH_BATCH)
    _ingested(without, worker=False)
    rows = _index_rows(through)
    assert len(rows) > 300
    assert rows == _index_rows(without)


@dataclass(frozen=True)
class _Entry:
    """What `PreparedWork` reads of a log entry."""

    namespace: str
    seq: int
    slice: str
    messages: tuple[Message, ...] = ()


def _entry(seq: int, summary: str = "s") -> LogEntry:
    return _Entry("ns", seq, summary)  # type: ignore[return-value]


def test_prepared_work_seen_again_is_kept_not_made_twice() -> None:
    made: list[int] = []
    started: list[int] = []

    def make(entry: LogEntry) -> int:
        made.append(entry.seq)
        return entry.seq * 10

    def later(entry: LogEntry) -> Callable[[], int] | None:
        if entry.seq % 2:
            return None  # made here and now
        started.append(entry.seq)
        return lambda: entry.seq * 10

    work: PreparedWork[int] = PreparedWork(make, later)
    first: Sequence[LogEntry] = [_entry(1), _entry(2), _entry(3), _entry(4)]
    work.prepare(first)
    assert work.take(first[0]) == 10
    assert work.take(first[1]) == 20
    work.prepare([first[2], first[3], _entry(5), _entry(6)])  # a lookahead: 3 and 4 again
    assert (made, started) == ([1, 3, 5], [2, 4, 6])
    assert [work.take(e) for e in (first[2], first[3])] == [30, 40]
    changed = _entry(5, "another summary")  # a forget changed it since: made again
    assert work.take(changed) == 50
    assert made == [1, 3, 5, 5]


def test_settled_work_is_waited_for_before_it_is_taken() -> None:
    """What a consumer takes in its transaction was waited for before it (`settle`)."""
    waited: list[int] = []

    def later(entry: LogEntry) -> Callable[[], int]:
        def result() -> int:
            waited.append(entry.seq)
            return entry.seq * 10

        return result

    work: PreparedWork[int] = PreparedWork(lambda entry: -1, later)
    entries = [_entry(1), _entry(2), _entry(3)]
    work.prepare(entries)
    work.settle(entries[:2])
    assert waited == [1, 2]
    assert [work.take(e) for e in entries] == [10, 20, 30]
    assert waited == [1, 2, 3]  # the unsettled one is waited for when taken


def test_the_worker_summarises_as_this_process_does() -> None:
    messages = [m for m in _messages() if m.content] * 3
    worker = _ready(shared_worker(("none",)))
    future = worker.summarize(messages, 420)
    assert future is not None
    assert future.result(timeout=READY_S) == ExtractiveSummarizer().summarize_here(messages)
    assert (worker.summarized, worker.answered) == (1, 0)
    # handed over by the summariser itself, the same text again
    elsewhere = ExtractiveSummarizer(elsewhere=summary_elsewhere)
    assert elsewhere.summarize(messages, UsageMeter()) == future.result()
    assert worker.summarized == 2


def test_a_summary_is_made_here_when_short_or_the_worker_is_busy() -> None:
    messages = [m for m in _messages() if m.content]
    many = messages * 4
    assert summary_elsewhere(many, 420) is None  # no worker runs: none is started
    assert running_worker(STATIC) is None
    worker = _ready(shared_worker(STATIC))
    assert summary_elsewhere(many[: HAND_OVER_MIN_MESSAGES - 1], 420) is None
    rows = worker.submit(many)  # an ingest's rows, still to come
    assert rows is not None
    made = summary_elsewhere(many, 420)  # asked at once: the worker has not answered yet
    assert made is None or rows.done()
    rows.result(timeout=READY_S)
    assert summary_elsewhere(many, 420) == ExtractiveSummarizer().summarize_here(many)


def _conversation() -> list[tuple[str, str]]:
    said = [m.content for m in read_transcript(LOCOMO_DIR / "conv-26.json").messages]
    return list(zip(said[::2], said[1::2], strict=False))


def _busy_service(database: str, *, worker: bool, turns: int, clock: ManualClock) -> None:
    """A service recording `turns` turns of a real conversation, rolling as it goes; with
    `worker`, past the live threshold it waits for the worker, so later rollings use it."""
    pairs = _conversation()
    service = MemoryService(
        open_store(database),
        owns_store=True,
        clock=clock,
        idle_timer=False,
        embeddings=EmbeddingSettings(analysis_worker=worker),
    )
    try:
        memory = service.memory("agent")
        for i in range(turns):
            clock.advance(1_000)
            question, answer = pairs[i % len(pairs)]
            memory.record_turn(question, answer)
            # the rolling a turn triggers takes its snapshot on the executor: waiting for
            # it here makes both runs roll the same windows
            memory.rolling.wait()
            if i % 30 == 0:
                service.wait()  # as a service with time between turns would
                started = running_worker(STATIC)
                if worker and started is not None:
                    _ready(started)
        service.wait()
    finally:
        service.close()


def _summaries(database: str) -> list[tuple[object, ...]]:
    store = open_store(database)
    try:
        with store._transaction(write=False) as cur:  # type: ignore[attr-defined]
            cur.execute("SELECT start_index, end_index, summary FROM slices ORDER BY start_index")
            return [tuple(row) for row in cur.fetchall()]
    finally:
        store.close()


@needs_locomo
def test_a_busy_service_hands_its_rollings_to_the_worker(tmp_path: Path) -> None:
    """Past LIVE_WORKER_MIN_MESSAGES indexed, a service's rollings are analysed and
    summarised in the worker, into exactly the rows and summaries made here."""
    turns = LIVE_WORKER_MIN_MESSAGES // 2 + 120
    through, here = str(tmp_path / "through.db"), str(tmp_path / "here.db")
    _busy_service(through, worker=True, turns=turns, clock=ManualClock())
    worker = running_worker(STATIC)
    assert worker is not None
    assert worker.answered >= 2
    assert worker.summarized >= 2
    close_workers()
    _busy_service(here, worker=False, turns=turns, clock=ManualClock())
    assert running_worker(STATIC) is None
    assert len(_summaries(through)) >= 8
    assert _summaries(through) == _summaries(here)
    assert _index_rows(through) == _index_rows(here)


@needs_locomo
def test_a_service_starts_no_worker_on_one_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(analysis_worker, "usable_cores", lambda: 1)
    turns = LIVE_WORKER_MIN_MESSAGES // 2 + 120
    _busy_service(str(tmp_path / "one.db"), worker=True, turns=turns, clock=ManualClock())
    assert running_worker(STATIC) is None


def test_the_worker_has_its_segmenter_loaded_when_it_is_ready() -> None:
    """jieba's dictionary is loaded as the worker starts, not by its first summary
    (which a rolling would wait for) nor between two batches of rows."""
    probe = (
        "import sys\n"
        "from partner_memory.recall.analysis_child import _analysis\n"
        "assert 'rjieba' not in sys.modules\n"
        "_analysis(('none',))\n"
        "print('rjieba' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=READY_S, check=True
    )
    assert done.stdout.strip() == "True"
