"""The keyword verbs every handle has, written once over its value verbs.

The embedded handle, its asyncio twin and both HTTP clients take a turn and a
forget as values (`TurnInput`, `ForgetRequest`); `record_turn` and the
`forget_*` verbs are one-line conveniences that build the value and pass it on,
so a handle writes only `record` and `forget`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Unpack

from partner_memory.requests import ForgetRequest, TurnInput, TurnOptions
from partner_memory.trajectory import Turn


class Conveniences(ABC):
    """`record_turn` and `forget_*` over `record` and `forget`."""

    @abstractmethod
    def record(self, turn: TurnInput) -> Turn: ...

    @abstractmethod
    def forget(self, request: ForgetRequest) -> int: ...

    def record_turn(
        self, user_input: str, assistant_output: str, **options: Unpack[TurnOptions]
    ) -> Turn:
        """Record one exchange (R10-R11); may start a rolling in the background (R13)."""
        return self.record(TurnInput.of(user_input, assistant_output, **options))

    def forget_messages(self, message_ids: Sequence[str]) -> int:
        """Forget messages wherever they are (a unit, the window): their text leaves every
        path - reading, recall, context, exports - and the slices that held them are
        summarised again from what remains. One transaction, recorded without content.
        Returns how many were found."""
        return self.forget(ForgetRequest.messages(message_ids))

    def forget_slice(self, unit_id: str, slice_id: str) -> int:
        """Forget a slice: its summary and every message it covers."""
        return self.forget(ForgetRequest.slice(unit_id, slice_id))

    def forget_unit(self, unit_id: str) -> None:
        """Forget a whole unit (one memory session): deleted with its slices."""
        self.forget(ForgetRequest.unit(unit_id))

    def forget_all(self) -> None:
        """Forget the namespace and everything in it - window, units, slices, context - in
        every process; it goes on empty."""
        self.forget(ForgetRequest("namespace"))


class AsyncConveniences(ABC):
    """`Conveniences` for asyncio: the same verbs, awaited."""

    @abstractmethod
    async def record(self, turn: TurnInput) -> Turn: ...

    @abstractmethod
    async def forget(self, request: ForgetRequest) -> int: ...

    async def record_turn(
        self, user_input: str, assistant_output: str, **options: Unpack[TurnOptions]
    ) -> Turn:
        """`Conveniences.record_turn`."""
        return await self.record(TurnInput.of(user_input, assistant_output, **options))

    async def forget_messages(self, message_ids: Sequence[str]) -> int:
        """`Conveniences.forget_messages`."""
        return await self.forget(ForgetRequest.messages(message_ids))

    async def forget_slice(self, unit_id: str, slice_id: str) -> int:
        return await self.forget(ForgetRequest.slice(unit_id, slice_id))

    async def forget_unit(self, unit_id: str) -> None:
        await self.forget(ForgetRequest.unit(unit_id))

    async def forget_all(self) -> None:
        await self.forget(ForgetRequest("namespace"))
