"""A memory served by `partner-memory serve`, used like the embedded handle.

`MemoryClient(url, namespace, key=...)` (and `AsyncMemoryClient`, awaited)
has the methods of `PartnerMemory` an agent uses - record, roll, context,
recall, forget, stats, topics - returning the same objects and raising the
same errors (`NotFoundError`, `InvalidInputError`, ...; `AccessDeniedError`
for a refused key), so moving memory out of the agent's process is one
line. Requests, answers and statuses are made in one place (`_Call`); the
two classes only differ in how they send them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Unpack
from urllib.parse import quote

import httpx

from partner_memory.context import DEFAULT_DOMAINS, Domain
from partner_memory.context.workspace import ResolvedBlock
from partner_memory.conveniences import AsyncConveniences, Conveniences
from partner_memory.errors import (
    AccessDeniedError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PartnerMemoryError,
    StorageUnavailableError,
)
from partner_memory.model import (
    MemorySlice,
    Message,
    RollingTotals,
    UnitInfo,
    WindowMessage,
    check_namespace,
)
from partner_memory.provenance import SliceReading
from partner_memory.recall.query import RecallOptions, RecallQuery
from partner_memory.recall.results import RecallResult, TopicCount
from partner_memory.requests import ForgetRequest, TurnInput
from partner_memory.rolling.after_rolling import RollingResult
from partner_memory.settings import DEFAULT_NAMESPACE
from partner_memory.trajectory import Turn

_ERRORS: dict[int, type[PartnerMemoryError]] = {
    401: AccessDeniedError,
    403: AccessDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: InvalidInputError,
    422: InvalidInputError,
    503: StorageUnavailableError,
}


@dataclass(frozen=True, slots=True)
class _Call:
    """One request, and how its answer becomes a result."""

    method: str
    path: str
    body: dict[str, Any] | None = None
    params: dict[str, Any] | None = None


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        message = str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        message = response.text[:500]
    kind = _ERRORS.get(response.status_code, PartnerMemoryError)
    raise kind(f"{message} (HTTP {response.status_code})")


def _message_body(message: Message) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content,
        "id": message.id,
        "timestamp": message.timestamp,
        "metadata": message.metadata,
    }


class _Requests:
    """The requests of each method, and the reading of their answers."""

    def __init__(self, namespace: str) -> None:
        self.namespace = check_namespace(namespace)
        self.prefix = f"/v1/namespaces/{quote(namespace, safe='')}"

    def record_turn(self, turn: TurnInput) -> _Call:
        return _Call("POST", f"{self.prefix}/turns", turn.to_dict())

    @staticmethod
    def turn(answer: dict[str, Any]) -> Turn:
        user, assistant = (Message.from_dict(m) for m in answer["messages"])
        return Turn(user, assistant, bool(answer["replied"]))

    def record_messages(self, messages: Sequence[Message], interaction: int | None) -> _Call:
        body = {"messages": [_message_body(m) for m in messages], "interaction": interaction}
        return _Call("POST", f"{self.prefix}/messages", body)

    def roll_now(self, idle: bool, through: str | None) -> _Call:
        params: dict[str, Any] = {"idle": idle} | ({} if through is None else {"through": through})
        return _Call("POST", f"{self.prefix}/roll", params=params)

    @staticmethod
    def rolled(answer: dict[str, Any]) -> RollingResult | None:
        if not answer["rolled"]:
            return None
        return RollingResult(
            memory_unit=UnitInfo.from_dict(answer["unit"]),
            memory_slice=MemorySlice.from_dict(answer["slice"]),
            increment_messages=tuple(Message.from_dict(m) for m in answer["increment_messages"]),
            summary=answer["summary"],
            rolling_size=answer["rolling_size"],
            retain_divisor=answer["retain_divisor"],
            idle=answer["idle"],
        )

    def context(self, domains: Sequence[Domain | str]) -> _Call:
        return _Call("GET", f"{self.prefix}/context", params={"domain": _domains(domains)})

    @staticmethod
    def blocks(answer: dict[str, Any]) -> list[ResolvedBlock]:
        return [ResolvedBlock.from_dict(b) for b in answer["blocks"]]

    def context_xml(self, domains: Sequence[Domain | str]) -> _Call:
        params = {"format": "xml", "domain": _domains(domains)}
        return _Call("GET", f"{self.prefix}/context", params=params)

    def window(self) -> _Call:
        return _Call("GET", f"{self.prefix}/window")

    @staticmethod
    def window_messages(answer: dict[str, Any]) -> list[WindowMessage]:
        return [WindowMessage.from_dict(m) for m in answer["messages"]]

    def read_slice(self, unit_id: str, slice_id: str) -> _Call:
        unit = f"{self.prefix}/units/{quote(unit_id, safe='')}"
        return _Call("GET", f"{unit}/slices/{quote(slice_id, safe='')}")

    def recall(self, asked: RecallQuery) -> _Call:
        body = {name: v for name, v in asked.to_dict().items() if v is not None}
        return _Call("POST", f"{self.prefix}/recall", body)

    def forget(self, request: ForgetRequest) -> _Call:
        if request.target == "messages":
            body = {"message_ids": list(request.message_ids)}
            return _Call("POST", f"{self.prefix}/forget/messages", body)
        if request.target == "namespace":
            return _Call("DELETE", self.prefix)
        unit = f"{self.prefix}/units/{quote(request.unit_id or '', safe='')}"
        if request.target == "unit":
            return _Call("DELETE", unit)
        return _Call("DELETE", f"{unit}/slices/{quote(request.slice_id or '', safe='')}")

    @staticmethod
    def forgotten(answer: dict[str, Any]) -> int:
        return int(answer.get("message_count", 0))

    def create(self) -> _Call:
        return _Call("POST", "/v1/namespaces", {"namespace": self.namespace})

    def stats(self) -> _Call:
        return _Call("GET", f"{self.prefix}/stats")

    def topics(self, limit: int) -> _Call:
        return _Call("GET", f"{self.prefix}/topics", params={"limit": limit})


def _domains(domains: Sequence[Domain | str]) -> list[str]:
    return [d.value if isinstance(d, Domain) else str(d) for d in domains]


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


class MemoryClient(Conveniences):
    """One namespace of a remote memory, with the embedded handle's methods."""

    def __init__(
        self,
        url: str,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.namespace = namespace
        self._requests = _Requests(namespace)
        self._http = httpx.Client(
            base_url=url, headers=_headers(key), timeout=timeout, transport=transport
        )

    def _send(self, call: _Call) -> httpx.Response:
        try:
            response = self._http.request(
                call.method, call.path, json=call.body, params=call.params
            )
        except httpx.TransportError as exc:
            raise StorageUnavailableError(f"memory service unreachable: {exc}") from exc
        _raise_for(response)
        return response

    def _json(self, call: _Call) -> dict[str, Any]:
        answer: dict[str, Any] = self._send(call).json()
        return answer

    def record(self, turn: TurnInput) -> Turn:
        """`record_turn` with the exchange as a value."""
        return self._requests.turn(self._json(self._requests.record_turn(turn)))

    def record_messages(
        self, messages: Sequence[Message], *, interaction: int | None = None
    ) -> int:
        """Record messages as they are; returns the window's length right after."""
        call = self._requests.record_messages(messages, interaction)
        return int(self._json(call)["window_length"])

    def roll_now(self, *, idle: bool = False, through: str | None = None) -> RollingResult | None:
        """Roll now; what the rolling made, or None (too little to roll)."""
        return self._requests.rolled(self._json(self._requests.roll_now(idle, through)))

    def context(self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS) -> list[ResolvedBlock]:
        return self._requests.blocks(self._json(self._requests.context(domains)))

    def context_xml(self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS) -> str:
        return self._send(self._requests.context_xml(domains)).text

    def window(self) -> list[WindowMessage]:
        """The window, oldest first, each message with its interaction's time."""
        return self._requests.window_messages(self._json(self._requests.window()))

    def recall(self, query: str | RecallQuery, **options: Unpack[RecallOptions]) -> RecallResult:
        call = self._requests.recall(RecallQuery.of(query, **options))
        return RecallResult.from_dict(self._json(call))

    def read_slice(self, unit_id: str, slice_id: str) -> SliceReading:
        """A slice, the messages it covers and where each summary sentence came from
        (either id may be an unambiguous prefix)."""
        return SliceReading.from_dict(self._json(self._requests.read_slice(unit_id, slice_id)))

    def forget(self, request: ForgetRequest) -> int:
        """Carry out a forget; forgetting the namespace leaves it going on empty."""
        if request.target != "namespace":
            return self._requests.forgotten(self._json(self._requests.forget(request)))
        for call in (self._requests.forget(request), self._requests.create()):
            # not there yet; made again meanwhile
            with contextlib.suppress(NotFoundError, ConflictError):
                self._send(call)
        return 0

    def stats(self) -> RollingTotals:
        return RollingTotals.from_dict(self._json(self._requests.stats())["rolling_totals"])

    def topics(self, *, limit: int = 100) -> list[TopicCount]:
        answer = self._json(self._requests.topics(limit))
        return [TopicCount.from_dict(t) for t in answer["topics"]]

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemoryClient(AsyncConveniences):
    """`MemoryClient` for asyncio: the same methods, awaited."""

    def __init__(
        self,
        url: str,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        key: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.namespace = namespace
        self._requests = _Requests(namespace)
        self._http = httpx.AsyncClient(
            base_url=url, headers=_headers(key), timeout=timeout, transport=transport
        )

    async def _send(self, call: _Call) -> httpx.Response:
        try:
            response = await self._http.request(
                call.method, call.path, json=call.body, params=call.params
            )
        except httpx.TransportError as exc:
            raise StorageUnavailableError(f"memory service unreachable: {exc}") from exc
        _raise_for(response)
        return response

    async def _json(self, call: _Call) -> dict[str, Any]:
        answer: dict[str, Any] = (await self._send(call)).json()
        return answer

    async def record(self, turn: TurnInput) -> Turn:
        """`record_turn` with the exchange as a value."""
        return self._requests.turn(await self._json(self._requests.record_turn(turn)))

    async def record_messages(
        self, messages: Sequence[Message], *, interaction: int | None = None
    ) -> int:
        call = self._requests.record_messages(messages, interaction)
        return int((await self._json(call))["window_length"])

    async def roll_now(
        self, *, idle: bool = False, through: str | None = None
    ) -> RollingResult | None:
        return self._requests.rolled(await self._json(self._requests.roll_now(idle, through)))

    async def context(
        self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS
    ) -> list[ResolvedBlock]:
        return self._requests.blocks(await self._json(self._requests.context(domains)))

    async def context_xml(self, domains: Sequence[Domain | str] = DEFAULT_DOMAINS) -> str:
        return (await self._send(self._requests.context_xml(domains))).text

    async def window(self) -> list[WindowMessage]:
        return self._requests.window_messages(await self._json(self._requests.window()))

    async def recall(
        self, query: str | RecallQuery, **options: Unpack[RecallOptions]
    ) -> RecallResult:
        call = self._requests.recall(RecallQuery.of(query, **options))
        return RecallResult.from_dict(await self._json(call))

    async def read_slice(self, unit_id: str, slice_id: str) -> SliceReading:
        call = self._requests.read_slice(unit_id, slice_id)
        return SliceReading.from_dict(await self._json(call))

    async def forget(self, request: ForgetRequest) -> int:
        if request.target != "namespace":
            return self._requests.forgotten(await self._json(self._requests.forget(request)))
        for call in (self._requests.forget(request), self._requests.create()):
            with contextlib.suppress(NotFoundError, ConflictError):
                await self._send(call)
        return 0

    async def stats(self) -> RollingTotals:
        answer = await self._json(self._requests.stats())
        return RollingTotals.from_dict(answer["rolling_totals"])

    async def topics(self, *, limit: int = 100) -> list[TopicCount]:
        answer = await self._json(self._requests.topics(limit))
        return [TopicCount.from_dict(t) for t in answer["topics"]]

    async def close(self) -> None:
        await self._http.aclose()

    async def aclose(self) -> None:
        """`close`, under httpx's name for it."""
        await self.close()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
