"""MemoryRuntime: what one process owns for any number of namespaces.

It owns what is costly or must be shared - the store, the LLM client, one
bounded rolling executor, one scheduler thread (idle checks over every
namespace it serves, read from the database; lease renewal; durable
consumers' catch-up) and one AfterRolling thread - and builds each served
namespace's parts (`bind`). `MemoryService` adds the handles it hands out;
a namespace's state lives in the database, so handles in other processes
see and roll the same memory.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, Protocol, Self, TypedDict, Unpack

from opentelemetry.trace import Span

from partner_memory import store_gauges as health
from partner_memory.clock import Clock, system_clock
from partner_memory.core import MemoryCore
from partner_memory.errors import ConfigurationError, InvalidInputError
from partner_memory.forgetting import Forgetting
from partner_memory.items import Items
from partner_memory.keys import KeyRing
from partner_memory.namespace_context import NamespaceContext
from partner_memory.queries import MemoryQueries
from partner_memory.recall.analysis_worker import summary_elsewhere
from partner_memory.recall.analyze import RecallAnalysis
from partner_memory.recall.embed import EmbeddingSettings
from partner_memory.recall.engine import RecallEngine
from partner_memory.recall.indexer import RECALL_CONSUMER, RecallIndexer
from partner_memory.recall.replica_follower import ReplicaFollower
from partner_memory.recall.replicas import IndexReplicas, RecallIndexSettings
from partner_memory.recall.topics import TopicExtractor
from partner_memory.requests import ForgetRequest
from partner_memory.rolling import (
    ChatClient,
    ExtractiveSummarizer,
    LLMCompressor,
    LLMSettings,
    LLMSummarizer,
    MessageCompressor,
    MessageSummarizer,
    RollingResult,
    RollingSettings,
    SummarizerChain,
    TruncatingCompressor,
)
from partner_memory.rolling.after_rolling import AfterRollingRegistry
from partner_memory.rolling.consumers import ConsumerDispatcher, DurableConsumer
from partner_memory.rolling.dialog_rolling import DialogRolling
from partner_memory.rolling.follow_lock import FollowLock
from partner_memory.rolling.lease import LeaseKeeper
from partner_memory.store import MemoryStore
from partner_memory.store.contract.capabilities import RECALL_ROWS, RecallStore, TopicStore, require
from partner_memory.telemetry import names as n
from partner_memory.telemetry.instruments import instruments, operation
from partner_memory.trajectory import Trajectory

log = logging.getLogger(__name__)

#: Rollings run at once by one service; more wait in its queue (holding their lease).
DEFAULT_ROLLING_WORKERS = 2


class NamespaceParts(NamedTuple):
    """What a handle of one namespace is made of, built by the runtime that serves it."""

    core: MemoryCore
    trajectory: Trajectory
    context_source: NamespaceContext
    after_rolling: AfterRollingRegistry
    rolling: DialogRolling


class Served(Protocol):
    """A handle as the runtime serves it: its scheduler rolls the namespace's quiet."""

    @property
    def namespace(self) -> str: ...

    @property
    def rolling(self) -> DialogRolling: ...


class MemoryOptions(TypedDict, total=False):
    """How a memory runs: what `PartnerMemory(store, namespace, **options)` passes on."""

    llm: LLMSettings | None
    summarizers: Sequence[MessageSummarizer] | None
    compressor: MessageCompressor | None
    settings: RollingSettings | None
    clock: Clock
    idle_timer: bool
    owns_store: bool
    embeddings: EmbeddingSettings | None
    recall_index: RecallIndexSettings | None


class RuntimeOptions(MemoryOptions, total=False):
    """`MemoryOptions` and how many rollings run at once."""

    rolling_workers: int


class MemoryRuntime:
    """The process-wide owner of store, LLM client, executor and scheduler."""

    def __init__(self, store: MemoryStore, **options: Unpack[RuntimeOptions]) -> None:
        unknown = sorted(set(options) - RuntimeOptions.__optional_keys__)
        if unknown:
            raise TypeError(f"unknown memory option {unknown[0]!r}")
        self.store = store
        self.settings = options.get("settings") or RollingSettings()
        self.clock = clock = options.get("clock", system_clock)
        self._owns_store = options.get("owns_store", False)
        idle_timer = options.get("idle_timer", True)
        self._idle_timer = idle_timer and self.settings.idle_check_interval_s > 0
        llm = options.get("llm")
        self._client = ChatClient(llm) if llm is not None else None
        embeddings = options.get("embeddings") or EmbeddingSettings()
        self.summarizer = SummarizerChain(
            self._summarizers(options.get("summarizers"), handed_over=embeddings.analysis_worker)
        )
        compressor = options.get("compressor")
        if compressor is not None and not callable(getattr(compressor, "compress", None)):
            raise InvalidInputError(
                f"compressor has no compress(messages, meter) method: {type(compressor).__name__}"
            )
        self._owns_compressor = compressor is None
        self.compressor = compressor or self._compressor()
        self.leases = LeaseKeeper(store, self.settings.lease_ttl_s, on_acquire=self._start)
        workers = options.get("rolling_workers", DEFAULT_ROLLING_WORKERS)
        self.executor = ThreadPoolExecutor(max(1, workers), thread_name_prefix="pm-rolling")
        where = options.get("recall_index") or RecallIndexSettings()
        home = where.home(store.url)
        #: durable consumers: followed by one process of this host at a time (`FollowLock`)
        self.dispatcher = ConsumerDispatcher(store, clock, lock=FollowLock(home, store.url))
        self._handles: dict[str, Served] = {}
        self._watched: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._scheduler: threading.Thread | None = None
        self._closed = False
        #: How messages become recall rows: terms, and vectors from the embedder that
        #: `embeddings` chooses (the static model when not given).
        self.analysis = RecallAnalysis(embeddings.embedder(), worker=embeddings.analysis_worker)
        replicas = IndexReplicas(home, required=where.directory is not None)
        self.recall = RecallEngine(store, self.analysis, replicas=replicas)
        #: forgets elsewhere reach this host's index copies (a store with recall rows)
        self.replica_follower = ReplicaFollower(
            replicas, self.recall.generation, interval=where.follow_s
        )
        if isinstance(store, RecallStore):
            self.replica_follower.start()
        #: What the interfaces list and count (never a write).
        self.queries = MemoryQueries(store)
        self.forgetting = Forgetting(
            store, self.summarizer, self.compressor, self.settings, clock=clock
        )
        if not store.read_only:  # a read-only store is searched from the log (RecallEngine)
            if isinstance(store, RecallStore):
                self.register_consumer(RecallIndexer(self.analysis))
            if (
                isinstance(store, TopicStore)
                and self._client is not None
                and self._client.settings.topics  # none offline
            ):
                self.register_consumer(TopicExtractor(self._client, store))
        #: the store's health, as gauges at each metrics collection, while this runs
        self._unwatch = health.watch(store)

    def _summarizers(
        self, given: Sequence[MessageSummarizer] | None, *, handed_over: bool
    ) -> list[MessageSummarizer]:
        if given is not None:
            if not isinstance(given, Sequence) or isinstance(given, str):
                raise InvalidInputError(
                    f"summarizers must be a list of summarizers, got {type(given).__name__}"
                )
            for i, summarizer in enumerate(given):
                if not callable(getattr(summarizer, "summarize", None)):
                    raise InvalidInputError(
                        f"summarizers[{i}] has no summarize(messages, meter) method:"
                        f" {type(summarizer).__name__}"
                    )
            return list(given)
        chain: list[MessageSummarizer] = []
        if self._client is not None:
            chain.append(LLMSummarizer(self._client))
        # the offline summary goes to the analysis worker when one runs (and is allowed)
        chain.append(ExtractiveSummarizer(elsewhere=summary_elsewhere if handed_over else None))
        return chain

    def _compressor(self) -> MessageCompressor:
        s = self.settings
        if self._client is not None:
            return LLMCompressor(
                self._client,
                threshold=s.compress_threshold,
                limit=s.compress_limit,
                window=s.boundary_window,
            )
        return TruncatingCompressor(s.compress_threshold, s.compress_limit, s.boundary_window)

    @classmethod
    def open(cls, database: str | Path | None = None, **options: Any) -> Self:
        """Open `database` (or PARTNER_MEMORY_DB) with the LLM and rolling numbers of the
        environment (`Settings.from_env`); keyword options override them."""
        from partner_memory.config import Settings

        env = Settings.from_env()
        store = env.store.open(database)
        options = env.runtime_options() | options
        try:
            return cls(store, owns_store=True, **options)
        except BaseException:
            store.close()
            raise

    # -- handles ---------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only (every write raises ConfigurationError)."""
        return self.store.read_only

    @property
    def items(self) -> Items:
        """Values kept by namespace and exact key (ConfigurationError if the backend keeps
        none): what an adapter whose framework stores by key holds, never the store."""
        return Items(self.store, self.clock)

    @property
    def keys(self) -> KeyRing:
        """The API keys kept in the store (ConfigurationError if the backend keeps none)."""
        return KeyRing(self.store, self.clock)

    def bind(self, namespace: str, *, create: bool = True) -> NamespaceParts:
        """The parts of a handle on `namespace`, sharing this runtime's store, executor,
        leases and consumers (`create=False`: NotFoundError for an unknown namespace)."""
        with self._lock:
            if self._closed:
                raise ConfigurationError("the memory service is closed")
        core = MemoryCore(self.store, namespace, clock=self.clock, create=create)
        after_rolling = AfterRollingRegistry(core.namespace, self.dispatcher)
        return NamespaceParts(
            core=core,
            trajectory=Trajectory(self.store, core.namespace, clock=self.clock),
            context_source=NamespaceContext(self.store, core.namespace, self.settings, self.clock),
            after_rolling=after_rolling,
            rolling=DialogRolling(
                core,
                after_rolling,
                summarizer=self.summarizer,
                compressor=self.compressor,
                settings=self.settings,
                clock=self.clock,
                leases=self.leases,
                executor=self.executor,
            ),
        )

    def served(self, namespace: str) -> Served | None:
        """The handle of `namespace` this runtime serves, if any."""
        with self._lock:
            return self._handles.get(namespace)

    def adopt(self, handle: Served, *, watch_idle: bool = True) -> Served:
        """Serve a handle bound to this service; the one already served wins a race."""
        with self._lock:
            served = self._handles.setdefault(handle.namespace, handle)
            watch = watch_idle and self._idle_timer
            if watch:
                self._watched.add(handle.namespace)
        if watch:
            self._start()
        return served

    def namespaces_open(self) -> list[str]:
        with self._lock:
            return sorted(self._handles)

    def release(self, handle: Served) -> None:
        """Stop serving a handle (its namespace's memory stays in the store)."""
        with self._lock:
            if self._handles.get(handle.namespace) is handle:
                del self._handles[handle.namespace]
                self._watched.discard(handle.namespace)

    # -- durable consumers ------------------------------------------------------------

    def register_consumer(self, consumer: DurableConsumer) -> Future[None]:
        """Follow the rolling log of every namespace; the future ends when it has caught up."""
        self._start()
        return self.dispatcher.register(consumer)

    # -- forgetting ---------------------------------------------------------------------

    def forget(self, namespace: str, request: ForgetRequest) -> int:
        """Carry out a forget; how many messages it found (a unit or a namespace: 0)."""
        if request.target == "messages":
            return self.forget_messages(namespace, request.message_ids)
        unit_id = request.unit_id or ""  # the request's own check: set for these two
        if request.target == "slice":
            return self.forget_slice(namespace, unit_id, request.slice_id or "")
        if request.target == "unit":
            self.forget_unit(namespace, unit_id)
        else:
            self.forget_namespace(namespace)
        return 0

    def forget_messages(self, namespace: str, message_ids: Sequence[str]) -> int:
        """See `PartnerMemory.forget_messages`; the slices that held them are summarised
        again (by this service's summariser) before the one forgetting transaction."""
        with self._forgetting(namespace, "messages") as span:
            found = self.forgetting.messages(namespace, message_ids)
            span.set_attribute(n.MESSAGES, found)
            return found

    def forget_slice(self, namespace: str, unit_id: str, slice_id: str) -> int:
        """Forget a slice's summary and every message of its range."""
        named = {n.UNIT_ID: unit_id, n.SLICE_ID: slice_id}
        with self._forgetting(namespace, "slice", named) as span:
            found = self.forgetting.slice(namespace, unit_id, slice_id)
            span.set_attribute(n.MESSAGES, found)
            return found

    def forget_unit(self, namespace: str, unit_id: str) -> None:
        with self._forgetting(namespace, "unit", {n.UNIT_ID: unit_id}):
            self.forgetting.unit(namespace, unit_id)

    def forget_namespace(self, namespace: str) -> None:
        """Forget a namespace and everything in it; its handles here stop being served."""
        with self._forgetting(namespace, "namespace"):
            self.forgetting.namespace(namespace)
        with self._lock:
            self._handles.pop(namespace, None)
            self._watched.discard(namespace)

    @contextmanager
    def _forgetting(
        self, namespace: str, target: str, attributes: dict[str, str] | None = None
    ) -> Iterator[Span]:
        """A forget's span (`delete_memory`, or `delete_memory_store` for a namespace);
        whether it succeeded or not, this host's copy of the index goes (`_forgotten`);
        counted once it succeeded."""
        name = n.DELETE_MEMORY_STORE if target == "namespace" else n.DELETE_MEMORY
        with operation(name, namespace, {n.FORGET_TARGET: target, **(attributes or {})}) as span:
            try:
                yield span
            finally:
                self._forgotten(namespace)
        instruments().forgets.add(1, {n.FORGET_TARGET: target})

    def purge(self) -> list[str]:
        """Forgotten text out of the database's files as well (`ForgetStore.purge`), and
        out of this host's recall indexes (rebuilt from the database when next searched)."""
        rewritten = self.forgetting.purge()
        self.recall.replicas.purge()
        return rewritten

    def _forgotten(self, namespace: str) -> None:
        """This host's copy of the namespace's index goes at once, with what it held of
        the forgotten text: the next search rebuilds it (other hosts' copies are rebuilt
        when they next search it, as the forget moved the namespace's generation on)."""
        self.recall.replicas.drop(namespace)
        self.recall.forget_window(namespace)

    def reindex(self, namespace: str) -> int:
        """Rebuild the namespace's recall index from its units (after an import, a copy,
        or to apply a new analysis); returns the number of messages indexed."""
        return require(self.store, RECALL_ROWS).reindex_recall(
            namespace, RECALL_CONSUMER, self.analysis
        )

    def catch_up(self) -> None:
        """Let durable consumers process every rolling they have not yet, and wait for it."""
        self.dispatcher.catch_up(every=True).result()

    # -- the scheduler ----------------------------------------------------------------

    def _interval(self) -> float:
        renew = self.settings.lease_ttl_s / 3
        if self._idle_timer:
            return min(self.settings.idle_check_interval_s, renew)
        return renew

    def _start(self) -> None:
        with self._lock:
            if self._scheduler is not None or self._closed:
                return
            self._scheduler = threading.Thread(target=self._loop, name="pm-scheduler", daemon=True)
            self._scheduler.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval()):
            try:
                self.tick()
            except Exception:
                log.exception("memory service scheduler tick failed")

    def tick(self) -> list[Future[RollingResult | None]]:
        """One scheduler round: renew leases, run due idle checks, catch consumers up."""
        self.leases.renew()
        started = self.check_idle() if self._idle_timer else []
        if self.dispatcher.durable:
            self.dispatcher.catch_up()
        return started

    def check_idle(self) -> list[Future[RollingResult | None]]:
        """R14 for every watched namespace that the database says has gone quiet."""
        cutoff = self.clock() - self.settings.idle_after_ms
        with self._lock:
            watched = sorted(self._watched)
        started = []
        for namespace in self.store.idle_candidates(cutoff, watched) if watched else []:
            with self._lock:
                handle = self._handles.get(namespace)
            if handle is None:
                continue
            future = handle.rolling.check_idle()
            if future is not None:
                started.append(future)
        return started

    # -- lifecycle ---------------------------------------------------------------------

    def wait(self) -> None:
        """Wait until no rolling of this service is in flight and consumers have run."""
        with self._lock:
            handles = list(self._handles.values())
        for handle in handles:
            handle.rolling.wait()
        self.dispatcher.barrier()

    def close(self) -> None:
        """Stop the scheduler, finish rollings and consumers in flight, release resources."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            scheduler = self._scheduler
        self._stop.set()
        self._unwatch()
        self.replica_follower.close()
        if scheduler is not None:
            scheduler.join()
        self.executor.shutdown(wait=True)
        self.dispatcher.close()
        if self._owns_compressor and isinstance(self.compressor, LLMCompressor):
            self.compressor.close()
        with self._lock:
            self._handles.clear()
            self._watched.clear()
        if self._client is not None:
            self._client.close()
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
