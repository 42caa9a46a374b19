"""R20: consumers that run after each rolling, in the background, isolated from each other.

A consumer is any callable taking the `RollingResult`. Each is registered
once; on trigger they run one after another in registration order on the
service's consumer thread, so a slow or failing consumer never delays or
breaks rolling, and a failure of one is reported without stopping the next.
These consumers live in memory and see the rollings of this process;
`consumers.DurableConsumer` follows the log of every process instead.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from partner_memory.model import LogEntry, MemorySlice, Message, UnitInfo
from partner_memory.rolling.consumers import ConsumerDispatcher, describe
from partner_memory.store.contract.base import CommittedRolling

#: Failures kept in memory per namespace; the store counts them all.
MAX_FAILURES = 100

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RollingResult:
    """What a rolling produced, handed to every AfterRolling consumer."""

    memory_unit: UnitInfo
    memory_slice: MemorySlice
    increment_messages: tuple[Message, ...]
    summary: str
    rolling_size: int
    retain_divisor: int | None
    idle: bool = False

    @classmethod
    def from_log(cls, entry: LogEntry) -> RollingResult:
        """The result as a later reader of the rolling log sees it."""
        return cls(
            memory_unit=entry.unit,
            memory_slice=entry.slice,
            increment_messages=entry.messages,
            summary=entry.slice.summary,
            rolling_size=entry.rolling_size,
            retain_divisor=entry.retain_divisor,
            idle=entry.idle,
        )


AfterRolling = Callable[[RollingResult], object]


@dataclass(frozen=True, slots=True)
class ConsumerFailure:
    consumer: str
    slice_id: str
    error: str


def _name(consumer: AfterRolling) -> str:
    return getattr(consumer, "__qualname__", None) or type(consumer).__qualname__


class AfterRollingRegistry:
    """Holds the in-memory consumers of one namespace and runs them after each rolling."""

    def __init__(self, namespace: str, dispatcher: ConsumerDispatcher) -> None:
        self._namespace = namespace
        self._dispatcher = dispatcher
        self._consumers: list[AfterRolling] = []
        self._lock = threading.Lock()
        self._failures: deque[ConsumerFailure] = deque(maxlen=MAX_FAILURES)

    def register(self, consumer: AfterRolling) -> bool:
        """Add a consumer; registering the same one again is ignored (returns False)."""
        with self._lock:
            if any(c is consumer or c == consumer for c in self._consumers):
                return False
            self._consumers.append(consumer)
            return True

    @property
    def consumers(self) -> list[AfterRolling]:
        with self._lock:
            return list(self._consumers)

    @property
    def failures(self) -> list[ConsumerFailure]:
        """The latest consumer failures (at most MAX_FAILURES), oldest first."""
        with self._lock:
            return list(self._failures)

    def trigger(
        self, result: RollingResult, committed: CommittedRolling | None = None
    ) -> Future[None]:
        """Run every consumer on `result` in the background; the future ends when all did.

        Durable consumers of the service then follow the log of this namespace (the
        rolling `committed` taken unread where the backend gave its entry).
        """
        future: Future[None] = self._dispatcher.submit(self._run, self.consumers, result)
        self._dispatcher.follow(self._namespace, () if committed is None else [committed])
        return future

    def _run(self, consumers: Sequence[AfterRolling], result: RollingResult) -> None:
        for consumer in consumers:
            try:
                consumer(result)
            except Exception as exc:
                failure = ConsumerFailure(_name(consumer), result.memory_slice.id, repr(exc))
                log.warning("AfterRolling consumer %s failed: %r", failure.consumer, exc)
                with self._lock:
                    self._failures.append(failure)
                self._dispatcher.record_failure(
                    failure.consumer, self._namespace, durable=False, error=describe(exc)
                )

    def trigger_barrier(self) -> None:
        """Return once every consumer run triggered before this call has finished."""
        self._dispatcher.barrier()
