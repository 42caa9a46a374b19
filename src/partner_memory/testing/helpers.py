"""Small builders the contract tests share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import pytest

from partner_memory.model import Message, Role, RollingCost, new_id
from partner_memory.store.contract.base import MemoryStore, RollingCommit
from partner_memory.store.contract.capabilities import supports

T = TypeVar("T")


def messages(n: int, tag: str = "m", role: Role = "user") -> list[Message]:
    """`n` messages `tag-0` .. `tag-(n-1)`, each with a new id."""
    return [Message(role=role, content=f"{tag}-{i}") for i in range(n)]


def offers(store: object, capability: type) -> None:
    """Skip the test unless `store` offers `capability` (a protocol of `store.capabilities`)."""
    if not supports(store, capability):
        pytest.skip(f"{type(store).__name__} does not offer {capability.__name__}")


def held(value: T | None) -> T:
    """`value`, which the test expects to be there (an AssertionError if it is None)."""
    if value is None:
        raise AssertionError("expected a value, got None")
    return value


def rolling(
    holder: str,
    increment: Sequence[Message],
    *,
    drop: Sequence[str] = (),
    summary: str = "a summary",
    timestamp: int = 1_000,
    idle: bool = False,
    last_interaction: int | None = None,
    new_session_id: str | None = None,
    slice_id: str | None = None,
) -> RollingCommit:
    """A rolling's commit as `DialogRolling` makes one."""
    return RollingCommit(
        holder=holder,
        messages=list(increment),
        summary=summary,
        slice_id=slice_id or new_id(),
        timestamp=timestamp,
        cost=RollingCost("extractive", pipeline_ms=1.5, fallbacks=("no LLM",)),
        drop=list(drop),
        rolling_size=len(increment),
        retain_divisor=None if idle else 6,
        idle=idle,
        last_interaction=last_interaction,
        new_session_id=new_session_id,
    )


def trim_window(
    store: MemoryStore,
    namespace: str,
    drop: Sequence[str] = (),
    *,
    quiet_since: int | None = None,
) -> None:
    """What a rolling that stores nothing commits: `drop` leaves the window (R12) and, with
    `quiet_since`, the quiet after that interaction is marked rolled (R14 fires once)."""
    holder = new_id()
    if store.begin_rolling(namespace, holder, ttl_ms=60_000) is None:
        raise AssertionError(f"the rolling lease of {namespace!r} is held")
    idle = quiet_since is not None
    commit = rolling(holder, [], drop=drop, idle=idle, last_interaction=quiet_since)
    store.commit_rolling(namespace, commit)
