"""DialogRolling (R13-R16, R19): turn the trajectory into memory slices in the background.

Two triggers: the count trigger after a recorded turn (the window is too
long; keep the newest sixth) and the idle trigger from the service's
scheduler (nobody spoke for an hour; keep nothing and start a new memory
session). At most one rolling runs per namespace across every process: a
rolling first takes the namespace's lease in the database, and a trigger
that finds it taken returns at once. The caller's turn never waits for the LLM.

A rolling: take the lease and snapshot the shared window, work out the
increment not yet stored (by message id), compress long messages and
summarise (for the summary only - originals are stored), then commit in one
transaction: the slice, its log entry, the trimmed window, the idle
rolling's new session and the lease's release. Then the AfterRolling
consumers run; the context shows the new slice as its `dialog_history`.

Messages separated by a quiet gap longer than `idle_after_ms` never share a
unit, whichever trigger fired and whether or not a process ran through the
quiet: every window row carries its interaction's time, and a rolling covers
the window only up to its first gap (`bounded`).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Collection, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime

from opentelemetry import trace

from partner_memory.clock import Clock
from partner_memory.context import ContextBlock, Domain
from partner_memory.core import MemoryCore
from partner_memory.errors import InvalidInputError, PartnerMemoryError
from partner_memory.model import (
    MemorySlice,
    Message,
    RollingCost,
    WindowActivity,
    new_id,
    newest,
)
from partner_memory.provenance import provenance
from partner_memory.rolling.after_rolling import AfterRollingRegistry, RollingResult
from partner_memory.rolling.compress import MessageCompressor
from partner_memory.rolling.lease import LeaseKeeper
from partner_memory.rolling.llm import UsageMeter
from partner_memory.rolling.moment import Moment
from partner_memory.rolling.replay_group import ReplayGroup
from partner_memory.rolling.settings import RollingSettings
from partner_memory.rolling.summarize import SummarizerChain
from partner_memory.store.contract.base import CommittedRolling, RollingCommit, WindowAppend
from partner_memory.store.sql.durability import behind_the_caller
from partner_memory.telemetry import names as n
from partner_memory.telemetry.instruments import instruments, span
from partner_memory.trajectory import dropped_ids, idle_due, quiet_gap

#: Errors kept per namespace for inspection; the log has the rest.
MAX_ERRORS = 100

log = logging.getLogger(__name__)

DIALOG_HISTORY = "dialog_history"
DIALOG_ROLLING = "dialog_rolling"
_ABSTRACT_CHARS = 80


def dialog_history_block(
    unit_id: str, memory_slice: MemorySlice, settings: RollingSettings
) -> ContextBlock:
    """R19: the block a rolling leaves in context - summary, unit, slice and date-time."""
    when = datetime.fromtimestamp(memory_slice.timestamp / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")
    summary = memory_slice.summary
    short = summary if len(summary) <= _ABSTRACT_CHARS else summary[:_ABSTRACT_CHARS].rstrip() + "…"
    return ContextBlock(
        name=DIALOG_HISTORY,
        source=DIALOG_ROLLING,
        full=f"[{when} UTC] {summary}\n(unit {unit_id}, slice {memory_slice.id})",
        compact=f"[{when} UTC] {summary}",
        abstract=f"[{when} UTC] {short}",
        domains=frozenset({Domain.MEMORY, Domain.COMMUNICATION}),
        replace_fade=settings.replace_fade,
        time_fade_per_minute=settings.time_fade_per_minute,
        activate=settings.activate,
    )


class DialogRolling:
    """The rolling engine of one namespace, running on its service's executor."""

    def __init__(
        self,
        core: MemoryCore,
        after_rolling: AfterRollingRegistry,
        *,
        summarizer: SummarizerChain,
        compressor: MessageCompressor,
        settings: RollingSettings,
        clock: Clock,
        leases: LeaseKeeper,
        executor: Executor,
    ) -> None:
        self._store = core.store
        self._namespace = core.namespace
        self._after_rolling = after_rolling
        self._summarizer = summarizer
        self._compressor = compressor
        self.settings = settings
        self._clock = clock
        self._leases = leases
        self._executor = executor
        # single flight inside this process; the lease does it across processes
        self._running = threading.Lock()
        self.errors: list[BaseException] = []

    @property
    def namespace(self) -> str:
        return self._namespace

    # -- triggers ----------------------------------------------------------------

    def after_turn(self, appended: WindowAppend) -> Future[RollingResult | None] | None:
        """R13, checked after every recorded turn: the count trigger, and the end of a
        memory session when the turn came after a quiet gap (R14 as a property of the
        window: the conversation before the gap is rolled alone, into its own unit).

        The turn is stored by now: a failure to start the rolling is logged, not
        raised (a caller would retry and record the turn twice); the next turn,
        or the idle check, triggers again. The turn reads the window's length
        and nothing more: the lease and the snapshot are taken on the executor
        (`_guarded`), so a busy database or machine delays the rolling, not the turn.
        """
        before = appended.previous_interaction
        quiet = before is not None and self._clock() - before > self.settings.idle_after_ms
        if appended.length < self.settings.max_messages and not quiet:
            return None
        try:
            if not quiet and not self._running.locked() and not self._window_full():
                return None
        except PartnerMemoryError as exc:
            log.warning("could not start a rolling of %r: %s", self._namespace, exc)
            return None
        if not self._running.acquire(blocking=False):
            return None
        return self._submit(None, idle=False)

    def _window_full(self) -> bool:
        """R13 on the window as stored now, read without taking the lease. A turn appended
        while a rolling was in flight counts the messages that rolling has since trimmed:
        taking the lease to find nothing due would cost the caller two writes."""
        return self.due(self._store.window_activity(self._namespace), idle=False)

    def idle_due(self) -> bool:
        """R14, judged on the namespace's shared last interaction."""
        window = self._store.window_activity(self._namespace)
        return idle_due(window, self._clock(), self.settings.idle_after_ms)

    def check_idle(self) -> Future[RollingResult | None] | None:
        """R14: the idle trigger; fires once per quiet period."""
        return self.trigger(idle=True, recheck=True) if self.idle_due() else None

    def trigger(self, *, idle: bool, recheck: bool = False) -> Future[RollingResult | None] | None:
        """Start a rolling in the background, or return None if one is running anywhere (R15).

        The lease and the snapshot are taken here, in the caller's thread, so
        the rolling covers the window as it is now. With `recheck`, the
        trigger's condition is judged again under the lease. (The count
        trigger after a turn takes them on the executor instead: `after_turn`.)
        """
        if not self._running.acquire(blocking=False):
            return None
        try:
            moment = self._begin(idle, wait=False, recheck=recheck)
            if moment is None:
                self._running.release()
                return None
        except BaseException:
            self._running.release()
            raise
        return self._submit(moment, idle=idle)

    def _submit(self, moment: Moment | None, *, idle: bool) -> Future[RollingResult | None] | None:
        """Run `_guarded` on the executor; this process's single flight (`_running`) is held."""
        try:
            # in a copy of the caller's context: the rolling's span is a child of the
            # turn that triggered it, though it ends later
            run = contextvars.copy_context().run
            return self._executor.submit(run, self._guarded, moment, idle)
        except RuntimeError:  # shut down
            if moment is not None:
                self._leases.release(self._namespace)
            self._running.release()
            return None

    def _begin(self, idle: bool, *, wait: bool, recheck: bool) -> Moment | None:
        """Take the lease and fix the moment; None (lease given back) if there is nothing to do.

        A triggered rolling re-checks its trigger on the shared state it now
        owns: another process may have rolled, or spoken, meanwhile. An idle
        rolling is dated by its last interaction (`_dated`), so a replayed slice
        keeps its conversation's date.
        """
        ns = self._namespace
        state = self._leases.acquire(ns) if wait else self._leases.try_acquire(ns, peek=recheck)
        if state is None:
            return None
        now = self._clock()
        last = state.last_interaction
        moment = Moment(
            tuple(state.messages), last, self._dated(now, last, idle), idle, state.interactions
        )
        if recheck:
            moment = self.bounded(moment)
            if not (moment.ended or self.due(state.activity, idle=idle)):
                self._leases.release(ns)
                return None
        return moment

    def bounded(self, moment: Moment) -> Moment:
        """The moment up to the window's first quiet gap, if it has one.

        Messages separated by more than `idle_after_ms` of silence never share a
        unit: the part before the gap is rolled as an idle rolling would have
        rolled it (kept nothing, a new session after it, dated by its last
        interaction), whoever triggered - so a gap that no process ran
        through, or a turn that raced the idle check, still ends the session.
        """
        cut = quiet_gap(moment.interactions, self.settings.idle_after_ms)
        if cut is None:
            return moment
        last = newest(moment.interactions[:cut])
        if last is None:
            last = moment.last_interaction
        return Moment(
            moment.snapshot[:cut],
            last,
            self._dated(self._clock(), last, True),
            True,
            moment.interactions[:cut],
            ended=True,
        )

    def due(self, activity: WindowActivity, *, idle: bool) -> bool:
        """Whether a trigger's condition holds now: R14 for the idle trigger, R13 else."""
        if idle:
            return idle_due(activity, self._clock(), self.settings.idle_after_ms)
        return activity.length >= self.settings.max_messages

    def _dated(self, now: int, last: int | None, idle: bool) -> int:
        """A slice's (and its unit's) time: now, or for an idle rolling its last message's,
        so a unit is dated by its conversation, not by when the idle timer fired (a
        replayed one keeps its own date, not the next conversation's)."""
        if idle and last is not None:
            return min(now, last)
        return now

    def _guarded(self, moment: Moment | None, idle: bool) -> RollingResult | None:
        """A triggered rolling: acknowledged to nobody, so its commits need not wait for
        the disk (`store.durability`); its messages stay in the window until it commits.

        Without a `moment` (the count trigger after a turn), the lease and the
        snapshot are taken here, on the executor, so the turn that triggered
        waits for neither: the rolling covers the window as it stands now,
        turns recorded meanwhile included, and judges R13 again on it.
        """
        try:
            with behind_the_caller():
                if moment is None:
                    moment = self._deferred(idle)
                    if moment is None:
                        return None
                return self._rolled(moment, idle)
        except BaseException as exc:
            log.exception("rolling of %r failed", self._namespace)
            self.errors.append(exc)
            del self.errors[:-MAX_ERRORS]
            raise
        finally:
            self._running.release()

    def _deferred(self, idle: bool) -> Moment | None:
        """The lease and snapshot of a count trigger; None if another holder has the lease,
        nothing is due, or the database refused (logged: the next turn triggers again)."""
        try:
            return self._begin(idle, wait=False, recheck=True)
        except PartnerMemoryError as exc:
            log.warning("could not start a rolling of %r: %s", self._namespace, exc)
            return None

    def _rolled(self, moment: Moment, idle: bool) -> RollingResult | None:
        result = self._roll(moment)
        while moment.ended:  # the next conversation, if its own trigger holds
            follow = self._begin(idle, wait=False, recheck=True)
            if follow is None:
                break
            moment = follow
            result = self._roll(moment) or result
        return result

    def roll_now(self, *, idle: bool = False, through: str | None = None) -> RollingResult | None:
        """Roll in the caller's thread, after any rolling in flight (here or elsewhere).

        `through` rolls the window only up to that message (a replay resuming
        with two conversations in its window rolls the first one alone). A window
        holding several conversations (quiet gaps between them) is rolled one
        conversation at a time; the last rolling's result is returned.
        """
        with self._running:
            result: RollingResult | None = None
            first = True
            while True:
                moment = self._begin(idle, wait=True, recheck=False)
                assert moment is not None  # waiting for the lease always ends with it
                if through is not None:
                    if not first and through not in {m.id for m in moment.snapshot}:
                        self._leases.release(self._namespace)
                        return result  # rolled with an earlier conversation
                    moment = self._cut(moment, through)
                first = False
                moment = self.bounded(moment)
                result = self._roll(moment) or result
                if not moment.ended:
                    return result

    def _cut(self, moment: Moment, through: str) -> Moment:
        ids = [m.id for m in moment.snapshot]
        if through not in ids:
            self._leases.release(self._namespace)
            raise InvalidInputError(f"message {through!r} is not in the window")
        end = ids.index(through) + 1
        snapshot, interactions = moment.snapshot[:end], moment.interactions[:end]
        last = newest(interactions)
        if last is None:
            last = moment.last_interaction
        return Moment(
            snapshot, last, self._dated(moment.at, last, moment.idle), moment.idle, interactions
        )

    def wait(self) -> None:
        """Return once no rolling of this process is in flight for this namespace."""
        with self._running:
            pass

    # -- one rolling ---------------------------------------------------------------

    def _increment(
        self, snapshot: tuple[Message, ...], stored: Collection[str] | None
    ) -> list[Message]:
        """R16 by message id: the snapshot's messages not yet stored in any unit.

        Where the current unit's tail overlaps the snapshot this is exactly the
        reference's suffix/prefix rule (`increment.resolve_increment`), without
        its accidents: equal texts never match, and messages a refreshed
        session left in the window are not stored twice.
        """
        if stored is None:
            stored = self._store.stored_message_ids(self._namespace, [m.id for m in snapshot])
        return [m for m in snapshot if m.id not in stored]

    def _roll(self, moment: Moment) -> RollingResult | None:
        """One rolling under the lease; the lease is always committed or given back."""
        began = time.perf_counter()
        labels = {n.IDLE: moment.idle}
        try:
            with span(n.ROLLING_SPAN, {n.MEMORY_NAMESPACE: self._namespace, **labels}):
                commit = self.plan(moment)
                if commit is None:
                    return None
                committed = self._store.commit_rolling(self._namespace, commit)
                self._leases.committed(self._namespace)
                return self.finish(commit, committed)
        except Exception as exc:
            instruments().rollings.add(1, {**labels, n.ERROR_TYPE: type(exc).__qualname__})
            raise
        finally:
            self._leases.release(self._namespace)
            instruments().rolling_duration.record(time.perf_counter() - began, labels)

    def moment(
        self,
        snapshot: tuple[Message, ...],
        interactions: tuple[int | None, ...],
        *,
        idle: bool,
    ) -> Moment:
        """What a rolling of `snapshot` covers, now, up to its first quiet gap."""
        last = newest(interactions)
        return self.bounded(
            Moment(snapshot, last, self._dated(self._clock(), last, idle), idle, interactions)
        )

    def plan(self, moment: Moment, stored: Collection[str] | None = None) -> RollingCommit | None:
        """Everything one rolling will write (None: nothing), its summary made.

        `stored` are the snapshot's ids already in a unit, when the caller knows
        them (a replay planning several rollings before writing any); else the
        store is asked.
        """
        snapshot, idle = moment.snapshot, moment.idle
        began = time.perf_counter()
        if len(snapshot) <= 1 and not (moment.ended and snapshot):
            if idle and moment.last_interaction is not None:  # the quiet is noted, nothing rolled
                return replace(
                    self._commit_for(moment, [], "", RollingCost("none"), None),
                    drop=(),
                    new_session_id=None,
                )
            return None
        divisor = None if idle else self.settings.retain_divisor
        increment = self._increment(snapshot, stored)
        if not increment:
            if idle:  # R16: nothing new, but the quiet still ends the session
                return self._commit_for(moment, [], "", RollingCost("none"), None)
            return None
        own_ms = (time.perf_counter() - began) * 1000
        meter = UsageMeter(budget_s=self.settings.llm_budget_s)
        compressed = self._compressor.compress(increment, meter)
        summary = self._summarizer.summarize(compressed, meter)
        cost = RollingCost(
            summarizer=summary.summarizer,
            llm_calls=meter.calls,
            prompt_tokens=meter.prompt_tokens,
            completion_tokens=meter.completion_tokens,
            llm_ms=meter.latency_ms,
            pipeline_ms=own_ms,
            fallbacks=tuple(meter.fallbacks),
        )
        return self._commit_for(moment, increment, summary.text, cost, divisor)

    def finish(self, commit: RollingCommit, committed: CommittedRolling) -> RollingResult | None:
        """After the commit (whose slice the context now shows): AfterRolling."""
        update = committed.update
        _rolled(self._namespace, commit, None if update is None else update.slice.id)
        if update is None:
            return None
        result = RollingResult(
            memory_unit=update.unit,
            memory_slice=update.slice,
            increment_messages=tuple(commit.messages),
            summary=commit.summary,
            rolling_size=commit.rolling_size,
            retain_divisor=commit.retain_divisor,
            idle=commit.idle,
        )
        self._after_rolling.trigger(result, committed)
        return result

    @contextmanager
    def replay_group(self) -> Iterator[ReplayGroup]:
        """A replay's recordings and rollings, planned in memory and written in groups;
        no other rolling of this namespace runs in this process meanwhile."""
        with self._running, ReplayGroup(self, self._store, self._leases) as group:
            yield group

    def _commit_for(
        self,
        moment: Moment,
        increment: list[Message],
        summary: str,
        cost: RollingCost,
        divisor: int | None,
    ) -> RollingCommit:
        return RollingCommit(
            holder=self._leases.holder,
            messages=increment,
            summary=summary,
            slice_id=new_id(),
            timestamp=moment.at,
            cost=cost,
            drop=dropped_ids(moment.snapshot, divisor),
            rolling_size=len(moment.snapshot),
            retain_divisor=divisor,
            idle=moment.idle,
            last_interaction=moment.last_interaction,
            new_session_id=new_id() if moment.idle else None,
        )


def _rolled(namespace: str, commit: RollingCommit, slice_id: str | None) -> None:
    """A committed rolling in the metrics and on the current span; each fallback it took
    (a summariser or compressor that failed) also as a span event and a log event -
    naming the part that failed, never what it was given."""
    cost = commit.cost
    parts = instruments()
    labels = {n.IDLE: commit.idle, n.SUMMARIZER: cost.summarizer}
    parts.rollings.add(1, labels)
    parts.rolled_messages.add(len(commit.messages), labels)
    if cost.summarizer not in ("extractive", "placeholder"):  # those only quote
        checked = MemorySlice("checked", 0, len(commit.messages), commit.summary, 0)
        made_up = sum(not s.supported for s in provenance(checked, commit.messages))
        parts.unsupported.add(made_up, {n.SUMMARIZER: cost.summarizer})
    current = trace.get_current_span()
    current.set_attributes(
        {
            n.SUMMARIZER: cost.summarizer,
            n.MESSAGES: len(commit.messages),
            n.LLM_CALLS: cost.llm_calls,
            n.INPUT_TOKENS: cost.prompt_tokens,
            n.OUTPUT_TOKENS: cost.completion_tokens,
            n.FALLBACKS: len(cost.fallbacks),
        }
    )
    if slice_id is not None:
        current.set_attribute(n.SLICE_ID, slice_id)
    for fallback in cost.fallbacks:
        failed = fallback.partition(":")[0].strip() or "unknown"
        parts.fallbacks.add(1, {n.SUMMARIZER: failed})
        current.add_event(n.FALLBACK_EVENT, {n.SUMMARIZER: failed})
        log.warning(
            "rolling of %r fell back: %s failed",
            namespace,
            failed,
            extra={"event": "fallback", "namespace": namespace, "failed": failed},
        )
