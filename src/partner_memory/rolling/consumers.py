"""AfterRolling work of a whole service on one thread: in-memory consumers and durable followers.

A durable consumer follows the rolling log without seeing the database: for
each rolling it returns typed writes (`store.staged`: its own `Record`s, or
the recall rows and topics of the built-in followers), which the store
writes with the consumer's position in one transaction, so a crash can
delay it but never make it skip or repeat a rolling. Of the processes of a
host that serve a store, the one holding a consumer's `FollowLock` follows
it: when registered, after each rolling it commits, and at each tick of
its service's scheduler for rollings the others committed. A failing consumer
stays at its position, is retried later, and its failures are counted in
the store (shown by `stats`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from partner_memory.clip import clipped
from partner_memory.clock import Clock
from partner_memory.errors import InvalidInputError, PartnerMemoryError
from partner_memory.model import LogEntry
from partner_memory.rolling.follow import LogFollower
from partner_memory.rolling.follow_lock import FollowLock
from partner_memory.store.contract.base import CommittedRolling, MemoryStore
from partner_memory.store.contract.staged import Staged
from partner_memory.store.sql.durability import behind_the_caller
from partner_memory.telemetry import names as n
from partner_memory.telemetry.instruments import instruments, span

log = logging.getLogger(__name__)

#: Longest error text kept per failure.
MAX_ERROR_CHARS = 500
#: Rollings a durable consumer applies per transaction when catching up.
FOLLOW_BATCH = 50
#: Rollings a preparing consumer that says `lookahead = FOLLOW_LOOKAHEAD` sees ahead: the
#: next batch is prepared elsewhere (another process: `RecallAnalysis.bulk`) while this
#: one is written. Consumers that prepare here and now (an LLM's) see one batch.
FOLLOW_LOOKAHEAD = 2 * FOLLOW_BATCH


@runtime_checkable
class DurableConsumer(Protocol):
    """A consumer of the rolling log whose effects and position commit together."""

    #: Its position in the log (and its records) are kept under this name; keep it stable.
    name: str

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        """What one rolling makes the consumer write (`Record`, `Unrecord`, ...): written
        with its new position, in one transaction, exactly once. It runs before that
        transaction, holding no lock; when another process moved the consumer on first,
        the write is refused and `apply` may be called again for a rolling the other
        process wrote - keep its effects in what it returns."""
        ...


@runtime_checkable
class PreparingConsumer(DurableConsumer, Protocol):
    """A durable consumer with slow work (an LLM, an embeddings endpoint) to do per rolling:
    `prepare` does it before the transaction, so no lock is held while it waits."""

    def prepare(self, entries: Sequence[LogEntry]) -> None:
        """Work out what `apply` will need for these rollings (`PreparedWork` keeps it)."""
        ...


T = TypeVar("T")


class PreparedWork(Generic[T]):
    """What `prepare` made for each rolling, handed to `apply` only if the rolling it gets
    is the one prepared for (same slice, same messages); otherwise made again there.

    `later`, if given, may start the work elsewhere and return how to get its result
    (or None: it is made here and now). What was prepared and is seen again by the next
    `prepare` (a lookahead) is kept, not started twice."""

    def __init__(
        self,
        make: Callable[[LogEntry], T],
        later: Callable[[LogEntry], Callable[[], T] | None] | None = None,
    ) -> None:
        self._make = make
        self._later = later
        self._made: dict[tuple[str, int], tuple[LogEntry, Callable[[], T]]] = {}
        self._lock = threading.Lock()

    def prepare(self, entries: Sequence[LogEntry]) -> None:
        with self._lock:
            before = self._made
        made: dict[tuple[str, int], tuple[LogEntry, Callable[[], T]]] = {}
        for entry in entries:
            key = (entry.namespace, entry.seq)
            found = before.get(key)
            made[key] = found if found and _same(found[0], entry) else (entry, self._start(entry))
        with self._lock:  # what was prepared and is not seen again is dropped
            self._made = made

    def settle(self, entries: Sequence[LogEntry]) -> None:
        """Wait now for what was started elsewhere for `entries`, so that `take`, in the
        consumer's transaction, finds it made instead of waiting with the lock held."""
        for entry in entries:
            key = (entry.namespace, entry.seq)
            with self._lock:
                found = self._made.get(key)
            if found is None:
                continue
            value = found[1]()
            with self._lock:
                if self._made.get(key) is found:
                    self._made[key] = (found[0], _given(value))

    def _start(self, entry: LogEntry) -> Callable[[], T]:
        result = self._later(entry) if self._later is not None else None
        if result is not None:
            return result
        return _given(self._make(entry))

    def take(self, entry: LogEntry) -> T:
        with self._lock:
            found = self._made.pop((entry.namespace, entry.seq), None)
        if found is not None and _same(found[0], entry):
            return found[1]()
        return self._make(entry)


def _given(value: T) -> Callable[[], T]:
    return lambda: value


def _same(prepared: LogEntry, entry: LogEntry) -> bool:
    return (prepared.slice, prepared.messages) == (entry.slice, entry.messages)


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return clipped(text, MAX_ERROR_CHARS)


def _behind_the_caller(work: Callable[..., object], *args: Any) -> object:
    with behind_the_caller():
        return work(*args)


class ConsumerDispatcher:
    """Runs AfterRolling work in the background, one item at a time, for every namespace."""

    def __init__(
        self,
        store: MemoryStore,
        clock: Clock,
        *,
        lock: FollowLock | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="pm-after-rolling")
        self._durable: list[DurableConsumer] = []
        self._queued: set[str] = set()
        self._lock = threading.Lock()
        self._follower = LogFollower.of(store)
        #: which consumers this process follows (no lock given: every one)
        self._follow_lock = lock or FollowLock(None, store.url)

    @property
    def durable(self) -> list[DurableConsumer]:
        with self._lock:
            return list(self._durable)

    def followed(self, consumers: Sequence[DurableConsumer] | None = None) -> list[DurableConsumer]:
        """Of `consumers` (every durable one), those this process follows (holds the
        `FollowLock` of)."""
        chosen = self.durable if consumers is None else consumers
        return [c for c in chosen if self._follow_lock.follows(c.name)]

    def submit(self, work: Callable[..., object], *args: Any) -> Future[Any]:
        """Run `work` on the consumers' thread; its writes are acknowledged to nobody
        (what a consumer writes is redone from its position if lost)."""
        return self._executor.submit(_behind_the_caller, work, *args)

    def register(self, consumer: DurableConsumer) -> Future[None]:
        """Set the consumer up, then catch it up on every namespace in the background."""
        name = getattr(consumer, "name", None)
        if not isinstance(name, str) or not name or not callable(getattr(consumer, "apply", None)):
            raise InvalidInputError(
                f"a durable consumer needs a name and apply(entry): {type(consumer).__name__}"
            )
        with self._lock:
            if any(c.name == name for c in self._durable):
                return self.submit(lambda: None)
            self._durable.append(consumer)
        return self.submit(lambda: self._catch_up(self.followed([consumer])))

    def follow(self, namespace: str, committed: Sequence[CommittedRolling] = ()) -> None:
        """A rolling was committed in `namespace` (`committed`, when this process did):
        let every durable consumer process it.

        Requests for a namespace already queued are one: a replay that commits a
        hundred rollings at once is followed in one pass, not a hundred.
        """
        if not self.followed():
            return
        self._follower.committed(namespace, committed)
        with self._lock:
            if namespace in self._queued:
                return
            self._queued.add(namespace)
        self.submit(self._follow_all, namespace)

    def catch_up(self, *, every: bool = False) -> Future[None]:
        """Process whatever the log holds beyond each followed consumer's position; with
        `every`, of each durable consumer, whoever follows it (a caller waiting for them)."""
        return self.submit(lambda: self._catch_up(self.durable if every else self.followed()))

    def record_failure(self, consumer: str, namespace: str, *, durable: bool, error: str) -> None:
        try:
            self._store.record_consumer_failure(
                consumer, namespace, durable=durable, error=error, at=self._clock()
            )
        except PartnerMemoryError as exc:  # a read-only or closed store: the log line remains
            log.warning("could not record the failure of consumer %s: %s", consumer, exc)

    def _catch_up(self, consumers: list[DurableConsumer]) -> None:
        for consumer in consumers:
            try:
                lagging = self._store.lagging_namespaces(consumer.name)
            except PartnerMemoryError as exc:
                log.warning("consumer %s cannot read the log: %s", consumer.name, exc)
                continue
            for namespace in lagging:
                self._follow(consumer, namespace)

    def _follow_all(self, namespace: str) -> None:
        with self._lock:  # a rolling committed from now on queues another pass
            self._queued.discard(namespace)
        for consumer in self.followed():
            self._follow(consumer, namespace)

    def _follow(self, consumer: DurableConsumer, namespace: str) -> None:
        """Apply the rollings `consumer` has not yet in `namespace`, in batches, until it
        has caught up or fails (recorded; the next round tries again from where it is)."""
        labels = {n.CONSUMER: consumer.name}
        applied = 0

        def apply(entry: LogEntry) -> Sequence[Staged]:
            nonlocal applied
            staged = consumer.apply(entry)
            applied += 1
            return staged

        prepare = consumer.prepare if isinstance(consumer, PreparingConsumer) else None
        with span(n.CONSUMER_SPAN, {**labels, n.MEMORY_NAMESPACE: namespace}) as current:
            while True:
                applied = 0
                try:
                    entry = self._follower.round(
                        consumer.name,
                        namespace,
                        apply,
                        batch=FOLLOW_BATCH,
                        prepare=prepare,
                        lookahead=getattr(consumer, "lookahead", FOLLOW_BATCH),
                    )
                except Exception as exc:
                    failed = type(exc).__qualname__
                    instruments().consumer_failures.add(1, {**labels, n.ERROR_TYPE: failed})
                    current.set_attribute(n.ERROR_TYPE, failed)
                    log.warning(
                        "durable consumer %s failed on %r: %s",
                        consumer.name,
                        namespace,
                        failed,
                        extra={
                            "event": "consumer_failure",
                            "consumer": consumer.name,
                            "namespace": namespace,
                            "error_type": failed,
                        },
                    )
                    self.record_failure(consumer.name, namespace, durable=True, error=describe(exc))
                    return
                if entry is None:
                    return
                instruments().consumer_applied.add(applied, labels)
                current.set_attribute(n.CONSUMER_POSITION, entry.seq)

    def barrier(self) -> None:
        """Return once everything submitted before this call has run."""
        self.submit(lambda: None).result()

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._follow_lock.close()
