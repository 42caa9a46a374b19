"""The async API for agents built on asyncio: the same service and handles, awaited.

Every call runs the synchronous implementation in a worker thread
(`asyncio.to_thread`), so there is no second copy of the logic and the event
loop never waits on the database or the LLM. Rolling futures become
awaitables; AfterRolling consumers may be coroutine functions, which run on
the loop that registered them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, Unpack

from partner_memory.context import Domain, ResolvedBlock
from partner_memory.conveniences import AsyncConveniences
from partner_memory.memory import DEFAULT_DOMAINS, PartnerMemory
from partner_memory.model import Message, RollingTotals, WindowMessage
from partner_memory.provenance import SliceReading
from partner_memory.recall.query import RecallOptions, RecallQuery
from partner_memory.recall.results import RecallResult, TopicCount
from partner_memory.requests import ForgetRequest, TurnInput
from partner_memory.rolling import AfterRolling, RollingResult
from partner_memory.rolling.consumers import DurableConsumer
from partner_memory.service import MemoryService
from partner_memory.settings import DEFAULT_NAMESPACE
from partner_memory.trajectory import Turn

__all__ = ["AsyncMemoryService", "AsyncPartnerMemory"]

AsyncAfterRolling = Callable[[RollingResult], Awaitable[object]]


def _on_loop(consumer: AsyncAfterRolling, loop: asyncio.AbstractEventLoop) -> AfterRolling:
    """A sync consumer that runs the coroutine consumer on `loop` and waits for it."""

    def run(result: RollingResult) -> object:
        return asyncio.run_coroutine_threadsafe(_call(consumer, result), loop).result()

    run.__qualname__ = getattr(consumer, "__qualname__", type(consumer).__qualname__)
    return run


async def _call(consumer: AsyncAfterRolling, result: RollingResult) -> object:
    return await consumer(result)


class _Closing:
    """`close()` and `async with` for a wrapper of a sync object that has `close()`."""

    sync: PartnerMemory | MemoryService

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncPartnerMemory(_Closing, AsyncConveniences):
    """`PartnerMemory` for asyncio: the same handle, every blocking call awaited."""

    sync: PartnerMemory

    def __init__(self, memory: PartnerMemory) -> None:
        self.sync = memory
        self._async_consumers: dict[int, AfterRolling] = {}

    @classmethod
    async def open(
        cls, database: str | Path | None = None, namespace: str | None = None, **options: Any
    ) -> AsyncPartnerMemory:
        """`PartnerMemory.open`, awaited."""
        return cls(await asyncio.to_thread(PartnerMemory.open, database, namespace, **options))

    @property
    def namespace(self) -> str:
        return self.sync.namespace

    async def record(self, turn: TurnInput) -> Turn:
        return await asyncio.to_thread(self.sync.record, turn)

    async def record_messages(
        self, messages: Sequence[Message], *, interaction: int | None = None
    ) -> int:
        return await asyncio.to_thread(self.sync.record_messages, messages, interaction=interaction)

    async def roll_now(
        self, *, idle: bool = False, through: str | None = None
    ) -> RollingResult | None:
        return await asyncio.to_thread(self.sync.roll_now, idle=idle, through=through)

    async def check_idle(self) -> RollingResult | None:
        """Run the idle check; the result of the rolling it started, if it started one."""
        future = await asyncio.to_thread(self.sync.check_idle)
        return None if future is None else await asyncio.wrap_future(future)

    async def wait(self) -> None:
        await asyncio.to_thread(self.sync.wait)

    def register_after_rolling(
        self, consumer: AfterRolling | AsyncAfterRolling | DurableConsumer
    ) -> bool:
        """R20; a coroutine function runs on the running event loop."""
        if inspect.iscoroutinefunction(consumer) or inspect.iscoroutinefunction(
            getattr(consumer, "__call__", None)  # noqa: B004 - async callable objects
        ):
            key = id(consumer)
            if key in self._async_consumers:
                return False
            wrapped = _on_loop(consumer, asyncio.get_running_loop())  # type: ignore[arg-type]
            self._async_consumers[key] = wrapped
            return self.sync.register_after_rolling(wrapped)
        return self.sync.register_after_rolling(consumer)

    async def context(
        self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS
    ) -> list[ResolvedBlock]:
        return await asyncio.to_thread(self.sync.context, domains)

    async def context_xml(self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS) -> str:
        return await asyncio.to_thread(self.sync.context_xml, domains)

    async def window(self) -> list[WindowMessage]:
        return await asyncio.to_thread(self.sync.window)

    async def recall(
        self, query: str | RecallQuery, **options: Unpack[RecallOptions]
    ) -> RecallResult:
        return await asyncio.to_thread(self.sync.recall, RecallQuery.of(query, **options))

    async def read_slice(self, unit_id: str, slice_id: str) -> SliceReading:
        return await asyncio.to_thread(self.sync.read_slice, unit_id, slice_id)

    async def forget(self, request: ForgetRequest) -> int:
        return await asyncio.to_thread(self.sync.forget, request)

    async def topics(self, *, limit: int = 100) -> list[TopicCount]:
        return await asyncio.to_thread(self.sync.topics, limit=limit)

    async def stats(self) -> RollingTotals:
        return await asyncio.to_thread(self.sync.stats)


class AsyncMemoryService(_Closing):
    """`MemoryService` for asyncio: one per process, handing out `AsyncPartnerMemory`."""

    sync: MemoryService

    def __init__(self, service: MemoryService) -> None:
        self.sync = service

    @classmethod
    async def open(cls, database: str | Path | None = None, **options: Any) -> AsyncMemoryService:
        return cls(await asyncio.to_thread(MemoryService.open, database, **options))

    async def memory(
        self, namespace: str = DEFAULT_NAMESPACE, **options: Any
    ) -> AsyncPartnerMemory:
        return AsyncPartnerMemory(await asyncio.to_thread(self.sync.memory, namespace, **options))

    async def register_consumer(self, consumer: DurableConsumer) -> None:
        """Register a durable consumer; returns once it has caught up."""
        await asyncio.wrap_future(self.sync.register_consumer(consumer))

    async def wait(self) -> None:
        await asyncio.to_thread(self.sync.wait)
