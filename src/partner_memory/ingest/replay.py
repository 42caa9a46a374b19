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
    known = store.find_messages(namespace, [m.id for m in transcript.messages])
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
    the older part alone gives the units an uninterrupted run gives.
    """
    idle_after = memory.settings.idle_after_ms
    while True:
        messages = held.messages
        gap = next(
            (
                i
                for i in range(1, len(messages))
                if (before := messages[i - 1].timestamp) is not None
                and (after := messages[i].timestamp) is not None
                and after - before > idle_after
            ),
            None,
        )
        if gap is None:
            return
        memory.wait()
        memory.roll_now(idle=True, through=messages[gap - 1].id)
        held = memory.core.store.load_trajectory(memory.namespace)


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
    done, held = _already_recorded(memory, transcript)
    _close_quiet_gaps(memory, held)
    pending = [m for m in transcript.messages if m.id not in done]
    if progress and len(pending) < len(transcript.messages):
        progress(len(transcript.messages) - len(pending))
    settings = memory.settings
    idle_after, limit = settings.idle_after_ms, settings.max_messages
    batch: list[Message] = []
    with memory.rolling.replay_group() as group:

        def record() -> None:
            group.record(batch, interaction=clock())
            if progress:
                progress(len(batch))
            batch.clear()

        for message in pending:
            # Messages are recorded in batches that end exactly where a trigger could
            # fire (the count threshold, or a gap long enough to be idle), so the
            # result is what recording them one by one gives, at a fraction of the cost.
            if message.timestamp is not None:
                if batch and message.timestamp - clock() > idle_after:
                    record()
                clock.set(message.timestamp)
                if not batch:
                    group.check_idle(clock())
            batch.append(message)
            if group.window_length + len(batch) >= limit:
                record()
        if batch:
            record()
        if flush:
            group.roll(idle=True)
    recorded = len(pending)
    memory.wait()
    info = memory.core.store.get_namespace(memory.namespace)
    units, slices = (info.unit_count, info.slice_count) if info else (0, 0)
    return IngestReport(
        transcript=transcript.name,
        format=transcript.format,
        messages=len(transcript.messages),
        skipped=len(transcript.messages) - recorded,
        recorded=recorded,
        units=units,
        slices=slices,
        seconds=time.perf_counter() - started,
        totals=memory.stats(),
    )
