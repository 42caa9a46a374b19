"""R20: consumers that run after each rolling, in the background, isolated from each other.

A consumer is any callable taking the `RollingResult`. Each is registered
once; on trigger they run one after another in registration order on a
worker thread, so a slow or failing consumer never delays or breaks rolling,
and a failure of one is reported without stopping the next.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from partner_memory.model import MemorySlice, Message, UnitInfo

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


AfterRolling = Callable[[RollingResult], object]


@dataclass(frozen=True, slots=True)
class ConsumerFailure:
    consumer: str
    slice_id: str
    error: str


def _name(consumer: AfterRolling) -> str:
    return getattr(consumer, "__qualname__", None) or type(consumer).__qualname__


class AfterRollingRegistry:
    """Holds the consumers of one memory and runs them after each rolling."""

    def __init__(self) -> None:
        self._consumers: list[AfterRolling] = []
        self._lock = threading.Lock()
        self._failures: list[ConsumerFailure] = []
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="pm-after-rolling")

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
        """Every consumer failure so far, oldest first."""
        with self._lock:
            return list(self._failures)

    def trigger(self, result: RollingResult) -> Future[None]:
        """Run every consumer on `result` in the background; the future ends when all did."""
        return self._executor.submit(self._run, self.consumers, result)

    def _run(self, consumers: Sequence[AfterRolling], result: RollingResult) -> None:
        for consumer in consumers:
            try:
                consumer(result)
            except Exception as exc:
                failure = ConsumerFailure(_name(consumer), result.memory_slice.id, repr(exc))
                log.warning("AfterRolling consumer %s failed: %r", failure.consumer, exc)
                with self._lock:
                    self._failures.append(failure)

    def trigger_barrier(self) -> None:
        """Return once every consumer run triggered before this call has finished."""
        self._executor.submit(lambda: None).result()

    def close(self) -> None:
        """Wait for consumers already triggered, then stop the worker."""
        self._executor.shutdown(wait=True)
