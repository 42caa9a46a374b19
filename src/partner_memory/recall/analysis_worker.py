"""Recall analysis on a second core, for bulk work such as `ingest` and for busy services.

Analysing a message (its terms, its static vector) is pure Python and holds
the GIL, so in one process the indexer takes turns with the replay writing
the units: profiled on a 60,000-message ingest, analysis was a third of the
work and the index trailed the replay. A bulk caller (`RecallAnalysis.bulk`)
lends the analysis a worker process instead, which makes the same rows from
the same code and model while the replay goes on here; the replay hands it
what it is about to record (`RecallAnalysis.prefetch`), so the rows are made
before the index needs them.

A service's rollings hand their rows over too, once this process has
indexed `LIVE_WORKER_MIN_MESSAGES` messages live and has a core to spare:
measured on one writer thread, analysis in the process cost each rolling's
neighbouring turns about 1.5 ms of waiting for the GIL, a tenth of the
writer's throughput; a process that rolls a few times and exits never
starts a worker.

The worker is one child process per parent and embedder, started on first
use with `python -m partner_memory.recall.analysis_child` (not
`multiprocessing`, whose spawn imports the caller's main script again), and
kept until the parent exits: it reads pickled batches from its stdin and
exits at end of file, so it never outlives its parent. It is used once it
has loaded its model; until then, and if it ever fails, rows are made here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from partner_memory.model import Message, Role
from partner_memory.store.contract.staged import RecallRow

log = logging.getLogger(__name__)

#: What the worker needs to build its embedder: ("static", dimensions) or ("none",).
WorkerSpec = tuple[Any, ...]
#: What the worker is asked: ("rows", batch) or ("summary", max_chars, batch).
Request = tuple[Any, ...]
#: Messages a rolling's summary or rows need before they are handed over: fewer are
#: made here in less time than the round trip takes.
HAND_OVER_MIN_MESSAGES = 8
#: A message as it crosses the pipe: (id, role, content, timestamp, metadata). Plain
#: values pickle in C; a dataclass pickles field by field in Python, which cost the
#: parent a tenth of a 60,000-message ingest.
Sent = tuple[str, Role, str, int | None, dict[str, Any]]


def sent(messages: Sequence[Message]) -> list[Sent]:
    return [(m.id, m.role, m.content, m.timestamp, m.metadata) for m in messages]


def received(batch: Sequence[Sent]) -> list[Message]:
    """The messages of a batch, as the parent's store had them (checked when stored)."""
    return [Message.stored(*values) for values in batch]


class AnalysisWorker:
    """The parent's side: one child process making rows for `spec`'s embedder.

    Batches are answered in the order they are sent. A sender thread writes
    them and a reader thread takes the answers as they come, so `submit`
    never waits for the pipe and the worker never waits for the parent."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self._lock = threading.Lock()  # the futures
        self._ready = threading.Event()
        self._broken = False
        #: what each ticket asked ("rows", "summary") and where its answer goes
        self._pending: dict[int, tuple[str, Future[Any]]] = {}
        self._next = 0
        self._answered = {"rows": 0, "summary": 0}
        self._outbox: queue.SimpleQueue[tuple[int, Request] | None] = queue.SimpleQueue()
        try:
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "partner_memory.recall.analysis_child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=_child_environment(),
            )
        except OSError as exc:
            log.warning("recall analysis stays in this process: no worker: %s", exc)
            self._process = None
            self._broken = True
            return
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._to: IO[bytes] = self._process.stdin
        self._from: IO[bytes] = self._process.stdout
        self._threads = [
            threading.Thread(target=self._write, name="pm-analysis-out", daemon=True),
            threading.Thread(target=self._read, name="pm-analysis-in", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Whether the worker has loaded its model, waiting up to `timeout` seconds."""
        return self._ready.wait(timeout) and not self._broken

    @property
    def answered(self) -> int:
        """Batches the worker has made rows for."""
        return self._answered["rows"]

    @property
    def summarized(self) -> int:
        """Summaries the worker has made."""
        return self._answered["summary"]

    def submit(self, messages: Sequence[Message]) -> Future[list[RecallRow]] | None:
        """The rows of `messages`, to come; None when the worker is not ready or failed."""
        return self._ask(("rows", sent(messages)), idle=False)

    def summarize(self, messages: Sequence[Message], max_chars: int) -> Future[str] | None:
        """`ExtractiveSummarizer(max_chars)`'s summary of `messages`, to come; None unless
        the worker is ready and idle: batches are answered in order, and a rolling must not
        wait behind an ingest's rows."""
        return self._ask(("summary", max_chars, sent(messages)), idle=True)

    def _ask(self, request: Request, *, idle: bool) -> Future[Any] | None:
        if self._broken or not self._ready.is_set():
            return None
        future: Future[Any] = Future()
        with self._lock:
            if self._broken or (idle and self._pending):
                return None
            ticket, self._next = self._next, self._next + 1
            self._pending[ticket] = (request[0], future)
            self._outbox.put((ticket, request))
        return future

    def close(self) -> None:
        """End the worker (it exits at the end of its input) and reap it."""
        with self._lock:
            process, self._process = self._process, None
            self._broken = True  # its end of input is no failure to warn of
        if process is None:
            return
        self._outbox.put(None)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for thread in self._threads:
            thread.join()
        self._from.close()

    def _write(self) -> None:
        try:
            self._send(self.spec)  # answered once the model is loaded
            while (batch := self._outbox.get()) is not None:
                self._send(batch)
        except (OSError, ValueError) as exc:  # ValueError: the pipe is closed
            with self._lock:
                self._failed(exc)
        finally:
            with contextlib.suppress(OSError):
                self._to.close()

    def _send(self, value: object) -> None:
        # pickled whole, then written in one call: pickled into the pipe, each full buffer
        # let go of the GIL and waited a switch interval (5 ms) to get it back from a
        # busy replay, which the worker spent waiting for its batch
        self._to.write(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        self._to.flush()

    def _read(self) -> None:
        try:
            status, value = pickle.load(self._from)
            if status != "ok":
                raise WorkerFailed(value)
            self._ready.set()
            while True:
                ticket, status, value = pickle.load(self._from)
                with self._lock:
                    kind, future = self._pending.pop(ticket)
                if status == "ok":
                    self._answered[kind] += 1
                    future.set_result(value)
                else:
                    future.set_exception(WorkerFailed(value))
        except (OSError, EOFError, ValueError, pickle.UnpicklingError, WorkerFailed) as exc:
            with self._lock:
                self._failed(exc)

    def _failed(self, exc: BaseException) -> None:
        """No more batches for the worker; those waiting are made here (lock held)."""
        if not self._broken:
            log.warning("recall analysis goes on in this process: its worker failed: %s", exc)
        self._broken = True
        pending, self._pending = self._pending, {}
        for _, future in pending.values():
            future.set_exception(WorkerFailed(f"the worker ended: {exc}"))


class WorkerFailed(Exception):
    """The worker could not answer (it said why, or it is gone)."""


def _child_environment() -> dict[str, str]:
    """This environment, with this package importable wherever it was found here."""
    home = str(Path(__file__).resolve().parents[2])  # the directory holding the package
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (home, env.get("PYTHONPATH")) if p)
    return env


_workers: dict[WorkerSpec, AnalysisWorker] = {}
_workers_lock = threading.Lock()
#: Messages of bulk work this process has announced (`worth_a_worker`), and messages
#: its services' rollings have indexed (`live_worker`).
_announced = {"messages": 0, "live": 0}
#: Messages a service's rollings index in this process before they start the worker:
#: five rollings of the default window, past a short script's work.
LIVE_WORKER_MIN_MESSAGES = 300


def worth_a_worker(messages: int | None, minimum: int) -> bool:
    """Whether bulk work of `messages` (None: unknown) should start a worker: when it
    holds `minimum` messages, or this process's bulk work so far does, so a process
    ingesting many short sessions pays the worker's start once, as a long one does."""
    if messages is None:
        return True
    with _workers_lock:
        _announced["messages"] += messages
        return messages >= minimum or _announced["messages"] >= minimum


def live_worker(spec: WorkerSpec, messages: int) -> AnalysisWorker | None:
    """The worker for a service's rolling of `messages`, counting them: a running one, or
    one started once this process's rollings have indexed `LIVE_WORKER_MIN_MESSAGES` and
    another core can run it. None for a rolling too short to be worth handing over."""
    if messages < HAND_OVER_MIN_MESSAGES:
        return None
    with _workers_lock:
        worker = _workers.get(spec)
        if worker is not None:
            return worker
        _announced["live"] += messages
        due = _announced["live"] >= LIVE_WORKER_MIN_MESSAGES
    return shared_worker(spec) if due and usable_cores() >= 2 else None


def usable_cores() -> int:
    """Cores this process may run on (its affinity, where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def shared_worker(spec: WorkerSpec) -> AnalysisWorker:
    """This process's worker for `spec`, started on first use."""
    with _workers_lock:
        worker = _workers.get(spec)
        if worker is None:
            worker = _workers[spec] = AnalysisWorker(spec)
        return worker


def summary_elsewhere(messages: Sequence[Message], max_chars: int) -> str | None:
    """The offline summary of `messages`, made by a worker this process runs if one is
    idle (`ExtractiveSummarizer.elsewhere`); None: make it here. Never starts one."""
    if len(messages) < HAND_OVER_MIN_MESSAGES:
        return None
    worker = next(iter(started_workers()), None)
    future = worker.summarize(messages, max_chars) if worker is not None else None
    if future is None:
        return None
    try:
        return str(future.result())
    except WorkerFailed:
        return None


def started_workers() -> list[AnalysisWorker]:
    """The workers this process has started (for every embedder)."""
    with _workers_lock:
        return list(_workers.values())


def running_worker(spec: WorkerSpec) -> AnalysisWorker | None:
    """This process's worker for `spec` if one was started; never starts one."""
    with _workers_lock:
        return _workers.get(spec)


def close_workers() -> None:
    """End every worker this process started and forget the bulk work announced (tests;
    the exit does it anyway)."""
    with _workers_lock:
        workers = list(_workers.values())
        _workers.clear()
        _announced["messages"] = _announced["live"] = 0
    for worker in workers:
        worker.close()
