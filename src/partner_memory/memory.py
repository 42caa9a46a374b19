"""PartnerMemory: the handle an agent holds per namespace.

A handle ties one namespace to its `MemoryService`: the shared window in the
store, the rolling engine, the context (derived from the store, the same in
every process) and the AfterRolling consumers. `MemoryService.memory(namespace)`
hands handles out; constructing `PartnerMemory(store, namespace)` directly
makes a service of one, owned (and closed) by the handle. Record turns; read
context; close when done.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Unpack

from opentelemetry.trace import Span

from partner_memory.context import DEFAULT_DOMAINS, Domain, ResolvedBlock, render_xml
from partner_memory.conveniences import Conveniences
from partner_memory.core import MemoryCore
from partner_memory.model import Message, RollingTotals, WindowMessage, check_limit
from partner_memory.namespace_context import NamespaceContext
from partner_memory.provenance import SliceReading
from partner_memory.recall.query import RecallOptions, RecallQuery
from partner_memory.recall.results import RecallResult, TopicCount
from partner_memory.requests import ForgetRequest, TurnInput
from partner_memory.rolling import (
    AfterRolling,
    AfterRollingRegistry,
    DialogRolling,
    RollingResult,
    RollingSettings,
    SummarizerChain,
)
from partner_memory.rolling.consumers import DurableConsumer
from partner_memory.runtime import MemoryOptions, MemoryRuntime
from partner_memory.settings import DEFAULT_NAMESPACE
from partner_memory.store import MemoryStore
from partner_memory.store.contract.base import WindowAppend
from partner_memory.store.contract.capabilities import RecordQuery, StoredRecord, TopicStore
from partner_memory.telemetry import names as n
from partner_memory.telemetry.instruments import capturing_content, instruments, operation
from partner_memory.trajectory import Trajectory, Turn

__all__ = ["DEFAULT_DOMAINS", "PartnerMemory"]


class PartnerMemory(Conveniences):
    """Long-term memory of one namespace: record turns, roll them into slices, read context."""

    service: MemoryRuntime
    settings: RollingSettings
    core: MemoryCore
    trajectory: Trajectory
    context_source: NamespaceContext
    after_rolling: AfterRollingRegistry
    summarizer: SummarizerChain
    rolling: DialogRolling

    def __init__(
        self,
        store: MemoryStore,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        create: bool = True,
        **options: Unpack[MemoryOptions],
    ) -> None:
        """A memory with a service of its own (one rolling worker), closed with it;
        `options` are `MemoryOptions` (LLM, summarizers, settings, clock, ...)."""
        if "rolling_workers" in options:
            raise TypeError("a PartnerMemory rolls with one worker; share a service for more")
        service = MemoryRuntime(store, rolling_workers=1, **options)
        try:
            self._bind(service, namespace, create=create)
            self._owns_service = True
            service.adopt(self)
        except BaseException:
            service.close()
            raise

    @classmethod
    def attach(
        cls,
        service: MemoryRuntime,
        namespace: str,
        *,
        create: bool = True,
    ) -> PartnerMemory:
        """A handle on a service that others share; use `service.memory(namespace)`."""
        self = cls.__new__(cls)
        self._bind(service, namespace, create=create)
        self._owns_service = False
        return self

    def _bind(self, service: MemoryRuntime, namespace: str, *, create: bool) -> None:
        self.service = service
        self.settings = service.settings
        self.summarizer = service.summarizer
        parts = service.bind(namespace, create=create)
        self.core = parts.core
        self.trajectory = parts.trajectory
        self.context_source = parts.context_source
        self.after_rolling = parts.after_rolling
        self.rolling = parts.rolling

    @classmethod
    def open(
        cls,
        database: str | Path | None = None,
        namespace: str | None = None,
        **options: Any,
    ) -> PartnerMemory:
        """Open from settings: `database`/`namespace` or PARTNER_MEMORY_DB/_NAMESPACE, and
        the rest of the environment (`Settings.runtime_options`: the LLM, or offline
        summaries, rolling's numbers, the embedder, the recall index's home)."""
        from partner_memory.config import Settings

        env = Settings.from_env()
        store = env.store.open(database)
        options = env.runtime_options() | options
        try:
            named = env.store.namespace if namespace is None else namespace
            return cls(store, named, owns_store=True, **options)
        except BaseException:
            store.close()
            raise

    @property
    def namespace(self) -> str:
        return self.core.namespace

    # -- recording -----------------------------------------------------------------

    def record(self, turn: TurnInput) -> Turn:
        """`record_turn` with the exchange as a value (what the interfaces pass on)."""
        with operation(n.UPDATE_MEMORY, self.namespace) as span:
            recorded, appended = self.trajectory.record_input(turn)
            self._recorded(span, [turn.user_input, turn.assistant_output], appended)
            return recorded

    def record_messages(
        self, messages: Sequence[Message], *, interaction: int | None = None
    ) -> int:
        """Record plain messages; `interaction` (ms) counts as the last interaction time.

        Returns the window's length right after recording.
        """
        with operation(n.UPDATE_MEMORY, self.namespace) as span:
            appended = self.trajectory.record(messages, interaction=interaction)
            self._recorded(span, [m.content for m in messages], appended)
            return appended.length

    def _recorded(self, span: Span, texts: list[str], appended: WindowAppend) -> None:
        """After a recording: its span and count (the texts only with content capture on),
        then R13's triggers."""
        span.set_attributes({n.MESSAGES: len(texts), n.WINDOW_LENGTH: appended.length})
        if span.is_recording() and capturing_content():
            span.set_attribute(n.MEMORY_CONTENT, texts)
        instruments().messages_recorded.add(len(texts))
        self.rolling.after_turn(appended)

    # -- rolling -------------------------------------------------------------------

    def roll_now(self, *, idle: bool = False, through: str | None = None) -> RollingResult | None:
        """Roll now, in this thread (waits for a rolling in flight); idle keeps nothing.

        `through` rolls the window only up to that message id.
        """
        return self.rolling.roll_now(idle=idle, through=through)

    def check_idle(self) -> Future[RollingResult | None] | None:
        """Run the idle check now (the service's scheduler does this every few seconds)."""
        return self.rolling.check_idle()

    def wait(self) -> None:
        """Wait until no rolling of this process is in flight here and consumers have run."""
        self.rolling.wait()
        self.after_rolling.trigger_barrier()

    def register_after_rolling(self, consumer: AfterRolling | DurableConsumer) -> bool:
        """R20: run `consumer(result)` after each rolling; a second registration is ignored.

        A `DurableConsumer` is registered with the service instead: it follows
        the rolling log of every namespace, across processes and restarts.
        """
        if isinstance(consumer, DurableConsumer):
            if any(c.name == consumer.name for c in self.service.dispatcher.durable):
                return False
            self.service.register_consumer(consumer)
            return True
        return self.after_rolling.register(consumer)

    # -- reading -------------------------------------------------------------------

    def context(self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS) -> list[ResolvedBlock]:
        """R23: the context blocks for these domains, most relevant first; the newest
        summary is the `dialog_history` snapshot.

        Derived from the database at each call (`namespace_context`): every process
        gets the same blocks at the same moment, and reading changes nothing.
        """
        return self.context_source.resolve(domains)

    def read_slice(self, unit_id: str, slice_id: str) -> SliceReading:
        """A slice, the original messages it covers, and the messages each sentence of its
        summary came from (`provenance`); either id may be an unambiguous prefix."""
        return self.core.read_slice(*self.core.resolve_slice(unit_id, slice_id))

    def window(self) -> list[WindowMessage]:
        """The conversation window (what is not rolled yet), oldest first, each message
        with the time of the interaction that brought it."""
        return self.trajectory.window()

    # -- forgetting ----------------------------------------------------------------

    def forget(self, request: ForgetRequest) -> int:
        """Carry out a forget (the verbs below build one); how many messages it found.
        Forgetting the namespace leaves the handle going on with it empty."""
        found = self.service.forget(self.namespace, request)
        if request.target == "namespace":
            self._bind(self.service, self.namespace, create=True)
            if not self._owns_service:
                self.service.adopt(self)
        return found

    def context_xml(self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS) -> str:
        """R24: the resolved context as XML, ready for a prompt."""
        return render_xml(self.context(domains))

    def recall(self, query: str | RecallQuery, **options: Unpack[RecallOptions]) -> RecallResult:
        """The `k` messages that best match the query, best first, stored or still in the
        window, with the slices that hold them. `query` is a `RecallQuery` or its text,
        with its options as keywords: `since` (inclusive) and `until` (exclusive) keep
        to those times (ms). Without them, and with `dates`, a date in the query
        ("yesterday", "in May 2023", "上周"), read relative to the namespace's newest
        message, is preferred - or kept to, when the query asks for nothing else
        ("what happened yesterday"). `topic` ("travel->japan", with an LLM configured)
        keeps to the slices filed under it or below it - under its parent if none
        are - and names related topics. `role`, `speaker` (case-insensitive), `unit`
        and `metadata` (each key equal to its value, compared as JSON) keep to the
        messages that match all of them. Everything recorded before the call is
        found, in whichever process it was recorded. With `activate`, what was found
        goes into the namespace's context (every process's) as the
        `activated_memory_slices` block."""
        asked = RecallQuery.of(query, **options)
        told: dict[str, Any] = {n.TOP_K: asked.k, n.FILTERS: asked.filters_used}
        for name, at in ((n.SINCE, asked.since), (n.UNTIL, asked.until)):
            if at is not None:
                told[name] = at
        with operation(n.SEARCH_MEMORY, self.namespace, told) as span:
            if span.is_recording() and capturing_content():
                span.set_attribute(n.MEMORY_QUERY, asked.query)
            found = self.service.recall.recall(self.namespace, asked)
            span.set_attribute(n.RESULT_COUNT, len(found.hits))
            if found.date_range is not None:
                bounds = found.date_range.start_at, found.date_range.end_at
                for name, at in zip((n.DATE_FROM, n.DATE_TO), bounds, strict=True):
                    if at is not None:
                        span.set_attribute(name, at)
            instruments().recall_hits.record(len(found.hits))
            if asked.activate:
                self.context_source.activate(found)
            return found

    def topics(self, *, limit: int = 100) -> list[TopicCount]:
        """The topic paths the LLM filed this namespace's slices under, most used first
        (none without an LLM)."""
        check_limit(limit)
        if not isinstance(self.core.store, TopicStore):  # a backend without topics has none
            return []
        paths = self.core.store.topic_paths(self.namespace, limit=limit)
        return [TopicCount(path, count) for path, count in paths]

    def records(
        self, consumer: str, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[StoredRecord]:
        """What the durable consumer `consumer` recorded for this namespace, by key."""
        query = RecordQuery(consumer, prefix, after, limit)
        return self.service.queries.records(self.namespace, query)

    def stats(self) -> RollingTotals:
        """Totals over every rolling (messages, LLM calls, tokens, time) and consumer status."""
        return self.core.rolling_stats()

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Wait for this memory's rolling and consumers in flight; a service of one closes too."""
        if self._owns_service:
            self.service.close()
            return
        self.wait()
        self.service.release(self)

    def __enter__(self) -> PartnerMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
