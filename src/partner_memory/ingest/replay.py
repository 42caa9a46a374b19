"""Replay a transcript through the pipeline, with the transcript's own time.

The clock follows the messages' timestamps, so the idle trigger fires
between conversations days apart exactly as it would have live, and slices
carry the conversation's dates. Messages already stored (in a unit or in
the trajectory) are skipped, which makes an interrupted ingest safe to run
again: nothing is lost and nothing is stored twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from partner_memory.clock import system_clock
from partner_memory.errors import InvalidInputError
from partner_memory.ingest.transcripts import Transcript
from partner_memory.memory import PartnerMemory
from partner_memory.model import Message, RollingTotals, TrajectoryState
from partner_memory.trajectory import quiet_gap

#: Messages ahead of the replay whose recall rows are started in the analysis worker
#: (`RecallAnalysis.prefetch`), asked for every `PREFETCH_STEP` messages: far enough
#: that a rolling's rows are made before it commits, near enough to hold little.
PREFETCH_AHEAD = 8_192
PREFETCH_STEP = 1_024


class ReplayClock:
    """The transcript's time: set by the replay, never going back; wall time until first set."""

    def __init__(self) -> None:
        self._now: int | None = None
        self._lock = threading.Lock()

    def set(self, ms: int) -> None:
        with self._lock:
            self._now = ms if self._now is None else max(self._now, ms)

    def __call__(self) -> int:
        with self._lock:
            return system_clock() if self._now is None else self._now


@dataclass(slots=True)
class IngestReport:
    transcript: str
    format: str
    messages: int
    skipped: int
    recorded: int
    units: int
    slices: int
    seconds: float
    totals: RollingTotals
    #: The namespace's fallback count as this transcript started (warnings count from it).
    fallbacks_before: int = 0

    @property
    def messages_per_second(self) -> float:
        return self.recorded / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        """This transcript's part; the namespace's totals are the command's (docs/json.md)."""
        return {
            "transcript": self.transcript,
            "format": self.format,
            "message_count": self.messages,
            "recorded_count": self.recorded,
            "skipped_count": self.skipped,
            "elapsed_ms": round(self.seconds * 1000, 3),
            "messages_per_second": round(self.messages_per_second, 1),
        }


def _already_recorded(
    memory: PartnerMemory, transcript: Transcript
) -> tuple[set[str], TrajectoryState]:
    """Ids of the transcript already stored (in a unit or the window), and the window.

    An id that is stored with other content is refused, naming where it came
    from: skipping it would silently drop the transcript's message.
    """
    store, namespace = memory.core.store, memory.namespace
    info = store.get_namespace(namespace)
    # a namespace without units (a first ingest) stores none of them: not looked up one by one
    known = (
        store.find_messages(namespace, [m.id for m in transcript.messages])
        if info is None or info.unit_count
        else {}
    )
    held = store.load_trajectory(namespace)
    known.update((m.id, m) for m in held.messages)
    for message, origin in zip(transcript.messages, transcript.origins, strict=True):
        stored = known.get(message.id)
        if stored is not None and (stored.role, stored.content) != (message.role, message.content):
            raise InvalidInputError(
                f"{origin}: message id {message.id!r} is already stored with other content"
            )
    return set(known), held


def _close_quiet_gaps(memory: PartnerMemory, held: TrajectoryState) -> None:
    """Roll, conversation by conversation, a window that spans a quiet gap.

    A replay killed while an idle rolling was in flight leaves the next
    conversation's first messages in the window after the last one's; rolling
    everything before the last gap (one conversation per rolling, as every
    rolling splits at quiet gaps) gives the units an uninterrupted run gives,
    and leaves the last conversation in the window to go on.
    """
    idle_after = memory.settings.idle_after_ms
    # a killed replay may have recorded a batch as one interaction: its messages' own
    # times tell where the conversations part
    times = tuple(
        m.timestamp if m.timestamp is not None else t
        for m, t in zip(held.messages, held.interactions, strict=True)
    )
    last_gap, start = None, 0
    while (gap := quiet_gap(times[start:], idle_after)) is not None:
        start += gap
        last_gap = start
    if last_gap is None:
        return
    memory.wait()
    memory.roll_now(idle=True, through=held.messages[last_gap - 1].id)


def ingest(
    memory: PartnerMemory,
    transcript: Transcript,
    clock: ReplayClock,
    *,
    flush: bool = True,
    progress: Callable[[int], None] | None = None,
) -> IngestReport:
    """Record every message of `transcript` in order; `flush` rolls what is left at the end."""
    started = time.perf_counter()
    fallbacks_before = memory.stats().fallbacks
    done, held = _already_recorded(memory, transcript)
    _close_quiet_gaps(memory, held)
    pending = [m for m in transcript.messages if m.id not in done]
    if progress and len(pending) < len(transcript.messages):
        progress(len(transcript.messages) - len(pending))
    # the recall analysis of what is replayed runs on another core while the replay goes on
    with memory.service.analysis.bulk(len(pending)):
        _replay(memory, pending, clock, flush=flush, progress=progress)
        memory.wait()  # the index catches up
    info = memory.core.store.get_namespace(memory.namespace)
    units, slices = (info.unit_count, info.slice_count) if info else (0, 0)
    return IngestReport(
        transcript=transcript.name,
        format=transcript.format,
        messages=len(transcript.messages),
        skipped=len(transcript.messages) - len(pending),
        recorded=len(pending),
        units=units,
        slices=slices,
        seconds=time.perf_counter() - started,
        totals=memory.stats(),
        fallbacks_before=fallbacks_before,
    )


def _replay(
    memory: PartnerMemory,
    pending: list[Message],
    clock: ReplayClock,
    *,
    flush: bool,
    progress: Callable[[int], None] | None,
) -> None:
    settings = memory.settings
    idle_after, limit = settings.idle_after_ms, settings.max_messages
    batch: list[Message] = []
    times: list[int] = []  # each message's time as live recording it would have had
    with memory.rolling.replay_group() as group:

        def record() -> None:
            group.record(batch, interaction=clock(), interactions=times)
            if progress:
                progress(len(batch))
            batch.clear()
            times.clear()

        analysis = memory.service.analysis
        prefetched = 0  # pending[:prefetched] had their rows started (or were passed)
        now: int | None = None  # the clock as this loop last set it (it never goes back)
        for position, message in enumerate(pending):
            if position % PREFETCH_STEP == 0 and prefetched < len(pending):
                # what was recorded while the worker could take nothing is the index's
                # own work: started here too, it would be made twice
                ahead = position + PREFETCH_AHEAD
                if analysis.prefetch(pending[max(prefetched, position) : ahead]):
                    prefetched = ahead
            # Messages are recorded in batches that end exactly where a trigger could
            # fire (the count threshold, or a gap long enough to be idle), so the
            # result is what recording them one by one gives, at a fraction of the cost.
            if message.timestamp is not None:
                if batch and message.timestamp - (clock() if now is None else now) > idle_after:
                    record()
                clock.set(message.timestamp)
                now = clock()
                if not batch:
                    group.check_idle(now)
            batch.append(message)
            times.append(clock() if now is None else now)
            if group.window_length + len(batch) >= limit:
                record()
        if batch:
            record()
        if flush:
            group.roll(idle=True)
