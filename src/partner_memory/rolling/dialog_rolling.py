"""DialogRolling (R13-R16, R19): turn the trajectory into memory slices in the background.

Two triggers: the count trigger after a recorded turn (the window is too
long; keep the newest sixth) and the idle trigger from a periodic check
(nobody spoke for an hour; keep nothing and start a new memory session).
At most one rolling runs per memory: a trigger while one runs returns at
once. The caller's turn never waits for the LLM.

A rolling: snapshot the window, work out the increment not yet stored (by
message id), compress long messages and summarise (for the summary only -
originals are stored), append to the unit, put a `dialog_history` block in
the context workspace, trim the window, and hand the result to the
AfterRolling consumers.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import NamedTuple

from partner_memory.clock import Clock
from partner_memory.context import ContextBlock, ContextWorkspace, Domain
from partner_memory.core import MemoryCore
from partner_memory.model import MemorySlice, Message, RollingRecord
from partner_memory.rolling.after_rolling import AfterRollingRegistry, RollingResult
from partner_memory.rolling.compress import MessageCompressor
from partner_memory.rolling.llm import UsageMeter
from partner_memory.rolling.settings import RollingSettings
from partner_memory.rolling.summarize import SummarizerChain
from partner_memory.trajectory import Trajectory

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


class Moment(NamedTuple):
    """What a rolling covers, fixed when it is triggered."""

    snapshot: tuple[Message, ...]
    last_interaction: int | None
    #: The slice's time (ms).
    at: int


class DialogRolling:
    """The rolling engine of one namespace."""

    def __init__(
        self,
        core: MemoryCore,
        trajectory: Trajectory,
        workspace: ContextWorkspace,
        after_rolling: AfterRollingRegistry,
        *,
        summarizer: SummarizerChain,
        compressor: MessageCompressor,
        settings: RollingSettings,
        clock: Clock,
    ) -> None:
        self._core = core
        self._trajectory = trajectory
        self._workspace = workspace
        self._after_rolling = after_rolling
        self._summarizer = summarizer
        self._compressor = compressor
        self.settings = settings
        self._clock = clock
        self._running = threading.Lock()  # the single-flight flag of R15
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="pm-rolling")
        self._idle_rolled_for: int | None = None
        self.errors: list[BaseException] = []

    # -- triggers ----------------------------------------------------------------

    def after_turn(self) -> Future[RollingResult | None] | None:
        """R13: the count trigger, checked after every recorded turn."""
        if len(self._trajectory) >= self.settings.max_messages:
            return self.trigger(idle=False)
        return None

    def idle_due(self) -> bool:
        """R14: more than the idle time since the last interaction, not yet rolled for it."""
        last = self._trajectory.last_interaction
        if last is None or last == self._idle_rolled_for or len(self._trajectory) <= 1:
            return False
        return self._clock() - last > self.settings.idle_after_ms

    def check_idle(self) -> Future[RollingResult | None] | None:
        """R14: the idle trigger; fires once per quiet period."""
        return self.trigger(idle=True) if self.idle_due() else None

    def trigger(self, *, idle: bool) -> Future[RollingResult | None] | None:
        """Start a rolling in the background, or return None if one is running (R15).

        The snapshot and the rolling's time are taken here, in the caller's
        thread, so what a rolling covers does not depend on thread scheduling.
        """
        if not self._running.acquire(blocking=False):
            return None
        try:
            return self._executor.submit(self._guarded, self._moment(idle), idle)
        except RuntimeError:  # shut down
            self._running.release()
            return None

    def _moment(self, idle: bool) -> Moment:
        """The snapshot, last interaction and slice time at the moment a rolling is triggered.

        An idle rolling is dated when the idle timer would have fired: an hour
        after the last interaction (or now, if sooner), so a replayed slice keeps
        its conversation's date rather than the next conversation's.
        """
        snapshot = self._trajectory.snapshot()
        last = self._trajectory.last_interaction
        now = self._clock()
        if idle and last is not None:
            now = min(now, last + self.settings.idle_after_ms + 1)
        return Moment(snapshot, last, now)

    def _guarded(self, moment: Moment, idle: bool) -> RollingResult | None:
        try:
            return self._roll(moment, idle)
        except BaseException as exc:
            log.exception("rolling failed")
            self.errors.append(exc)
            raise
        finally:
            self._running.release()

    def roll_now(self, *, idle: bool = False) -> RollingResult | None:
        """Roll in the caller's thread, after any rolling in flight has finished."""
        with self._running:
            return self._roll(self._moment(idle), idle)

    def wait(self) -> None:
        """Return once no rolling is in flight."""
        with self._running:
            pass

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    # -- one rolling ---------------------------------------------------------------

    def _increment(self, snapshot: tuple[Message, ...]) -> list[Message]:
        """R16 by message id: the snapshot's messages not yet stored in any unit.

        Where the current unit's tail overlaps the snapshot this is exactly the
        reference's suffix/prefix rule (`increment.resolve_increment`), without
        its accidents: equal texts never match, and messages a refreshed
        session left in the window are not stored twice.
        """
        stored = self._core.store.stored_message_ids(self._core.namespace, [m.id for m in snapshot])
        return [m for m in snapshot if m.id not in stored]

    def _end_session(self, moment: Moment) -> None:
        """R14: after an idle rolling the next conversation goes to a new unit."""
        self._core.refresh_memory_session()
        self._idle_rolled_for = moment.last_interaction

    def _roll(self, moment: Moment, idle: bool) -> RollingResult | None:
        snapshot, started_at = moment.snapshot, moment.at
        began = time.perf_counter()
        if len(snapshot) <= 1:
            return None
        divisor = None if idle else self.settings.retain_divisor
        increment = self._increment(snapshot)
        if not increment:
            if idle:
                self._end_session(moment)
            return None
        own_ms = (time.perf_counter() - began) * 1000
        meter = UsageMeter()
        compressed = self._compressor.compress(increment, meter)
        summary = self._summarizer.summarize(compressed, meter)
        resumed = time.perf_counter()
        update = self._core.update_memory_unit(
            increment, summary.text, summarizer=summary.summarizer, timestamp=started_at
        )
        self._workspace.register(dialog_history_block(update.unit.id, update.slice, self.settings))
        self._trajectory.roll_with_snapshot(snapshot, divisor)
        if idle:
            self._end_session(moment)
        own_ms += (time.perf_counter() - resumed) * 1000
        self._core.store.record_rolling(
            self._core.namespace,
            RollingRecord(
                unit_id=update.unit.id,
                slice_id=update.slice.id,
                started_at=started_at,
                idle=idle,
                messages=len(increment),
                summarizer=summary.summarizer,
                llm_calls=meter.calls,
                prompt_tokens=meter.prompt_tokens,
                completion_tokens=meter.completion_tokens,
                llm_ms=meter.latency_ms,
                pipeline_ms=own_ms,
                fallbacks=tuple(meter.fallbacks),
            ),
        )
        result = RollingResult(
            memory_unit=update.unit,
            memory_slice=update.slice,
            increment_messages=tuple(increment),
            summary=summary.text,
            rolling_size=len(snapshot),
            retain_divisor=divisor,
            idle=idle,
        )
        self._after_rolling.trigger(result)
        return result

    def restore_context(self) -> int:
        """Put the newest slices back in context, oldest first, as a restarted agent needs."""
        recent = self._core.store.recent_slices(self._core.namespace, self.settings.restore_slices)
        for unit_id, memory_slice in reversed(recent):
            self._workspace.register(dialog_history_block(unit_id, memory_slice, self.settings))
        return len(recent)
