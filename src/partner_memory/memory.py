"""PartnerMemory: the one object an agent holds per namespace.

It wires the store, the trajectory, the rolling engine, the context
workspace and the AfterRolling consumers together, and runs the idle check
on a timer. Record turns; read context; close when done.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any

from partner_memory.clock import Clock, system_clock
from partner_memory.context import ContextWorkspace, Domain, ResolvedBlock, render_xml
from partner_memory.core import MemoryCore
from partner_memory.model import Message, RollingTotals
from partner_memory.rolling import (
    AfterRolling,
    AfterRollingRegistry,
    ChatClient,
    DialogRolling,
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
from partner_memory.settings import StoreSettings
from partner_memory.store import MemoryStore, open_store
from partner_memory.trajectory import Trajectory, Turn

DEFAULT_DOMAINS = (Domain.COMMUNICATION, Domain.MEMORY)


class PartnerMemory:
    """Long-term memory of one namespace: record turns, roll them into slices, read context."""

    def __init__(
        self,
        store: MemoryStore,
        namespace: str = "default",
        *,
        llm: LLMSettings | None = None,
        summarizers: Sequence[MessageSummarizer] | None = None,
        compressor: MessageCompressor | None = None,
        settings: RollingSettings | None = None,
        clock: Clock = system_clock,
        idle_timer: bool = True,
        restore_context: bool = True,
        owns_store: bool = False,
        create: bool = True,
    ) -> None:
        self.settings = settings or RollingSettings()
        self._store = store
        self._owns_store = owns_store
        self._clock = clock
        self.core = MemoryCore(store, namespace, clock=clock, create=create)
        self.trajectory = Trajectory(store, self.core.namespace, clock=clock)
        self.workspace = ContextWorkspace(clock)
        self.after_rolling = AfterRollingRegistry()
        self._client = ChatClient(llm) if llm is not None else None
        chain: list[MessageSummarizer] = list(summarizers or [])
        if summarizers is None:
            if self._client is not None:
                chain.append(LLMSummarizer(self._client))
            chain.append(ExtractiveSummarizer())
        s = self.settings
        if compressor is None:
            compressor = (
                LLMCompressor(
                    self._client,
                    threshold=s.compress_threshold,
                    limit=s.compress_limit,
                    window=s.boundary_window,
                )
                if self._client is not None
                else TruncatingCompressor(s.compress_threshold, s.compress_limit, s.boundary_window)
            )
        self.summarizer = SummarizerChain(chain)
        self.rolling = DialogRolling(
            self.core,
            self.trajectory,
            self.workspace,
            self.after_rolling,
            summarizer=self.summarizer,
            compressor=compressor,
            settings=self.settings,
            clock=clock,
        )
        if restore_context:
            self.rolling.restore_context()
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        if idle_timer and self.settings.idle_check_interval_s > 0:
            self._timer = threading.Thread(
                target=self._idle_loop, name="pm-idle-check", daemon=True
            )
            self._timer.start()

    @classmethod
    def open(
        cls,
        database: str | Path | None = None,
        namespace: str | None = None,
        **options: Any,
    ) -> PartnerMemory:
        """Open from settings: `database`/`namespace` or PARTNER_MEMORY_DB/_NAMESPACE, and
        the LLM from PARTNER_MEMORY_LLM_* (offline summaries when none is configured)."""
        env = StoreSettings.from_env()
        store = open_store(database or env.database, busy_timeout=env.busy_timeout)
        options.setdefault("llm", LLMSettings.from_env())
        try:
            return cls(store, namespace or env.namespace, owns_store=True, **options)
        except BaseException:
            store.close()
            raise

    @property
    def namespace(self) -> str:
        return self.core.namespace

    # -- recording -----------------------------------------------------------------

    def record_turn(
        self,
        user_input: str,
        assistant_output: str,
        *,
        source: str = "USER",
        timestamp: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Turn:
        """Record one exchange (R10-R11); may start a rolling in the background (R13)."""
        turn = self.trajectory.record_turn(
            user_input, assistant_output, source=source, timestamp=timestamp, metadata=metadata
        )
        self.rolling.after_turn()
        return turn

    def record_messages(
        self, messages: Sequence[Message], *, interaction: int | None = None
    ) -> None:
        """Record plain messages; `interaction` (ms) counts as the last interaction time."""
        self.trajectory.record(messages, interaction=interaction)
        self.rolling.after_turn()

    # -- rolling -------------------------------------------------------------------

    def roll_now(self, *, idle: bool = False) -> RollingResult | None:
        """Roll now, in this thread (waits for a rolling in flight); idle keeps nothing."""
        return self.rolling.roll_now(idle=idle)

    def check_idle(self) -> Future[RollingResult | None] | None:
        """Run the idle check now (the timer does this every few seconds)."""
        return self.rolling.check_idle()

    def wait(self) -> None:
        """Wait until no rolling is in flight and every consumer triggered so far has run."""
        self.rolling.wait()
        self.after_rolling.trigger_barrier()

    def register_after_rolling(self, consumer: AfterRolling) -> bool:
        """R20: run `consumer(result)` after each rolling; a second registration is ignored."""
        return self.after_rolling.register(consumer)

    # -- reading -------------------------------------------------------------------

    def context(self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS) -> list[ResolvedBlock]:
        """R23: the context blocks for these domains, most relevant first."""
        return self.workspace.resolve(domains)

    def context_xml(self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS) -> str:
        """R24: the resolved context as XML, ready for a prompt."""
        return render_xml(self.context(domains))

    def stats(self) -> RollingTotals:
        """Totals over every rolling: messages, LLM calls, tokens and time."""
        return self._store.rolling_totals(self.namespace)

    # -- lifecycle -----------------------------------------------------------------

    def _idle_loop(self) -> None:
        while not self._stop.wait(self.settings.idle_check_interval_s):
            try:
                self.rolling.check_idle()
            except Exception:  # pragma: no cover - logged by rolling; the timer must live on
                continue

    def close(self) -> None:
        """Stop the timer, wait for in-flight rolling and consumers, release resources."""
        self._stop.set()
        if self._timer is not None:
            self._timer.join()
        self.rolling.close()
        self.after_rolling.close()
        if self._client is not None:
            self._client.close()
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> PartnerMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
