"""The embedded handle, its asyncio twin and both clients offer the same methods with
the same parameters, defaults and results, checked mechanically so they cannot drift.
Only what needs the process itself is the handle's alone."""

from __future__ import annotations

import inspect
from typing import Any, get_type_hints

import pytest

from partner_memory.aio import AsyncPartnerMemory
from partner_memory.client import AsyncMemoryClient, MemoryClient
from partner_memory.memory import PartnerMemory

#: The handle's own, each with why a remote memory has no such method.
IN_PROCESS_ONLY = {
    "attach": "binds a handle to a service of this process",
    "open": "opens a database; a client is built from a URL",
    "wait": "waits for this process's rollings and consumers",
    "check_idle": "the service's scheduler runs it where the memory is",
    "register_after_rolling": "runs a callable of this process after each rolling",
    "records": "reads what a durable consumer of this process recorded",
}
#: Names the async objects add for their framework's conventions.
ALIASES = {"aclose"}


def _methods(kind: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(kind, callable)
        if not name.startswith("_")
    }


def _shape(function: Any) -> list[tuple[str, Any, Any]]:
    signature = inspect.signature(function)
    return [
        (p.name, p.kind, p.default)
        for p in signature.parameters.values()
        if p.name not in ("self", "cls")
    ]


def _returns(function: Any) -> Any:
    return get_type_hints(function).get("return")


HANDLE = _methods(PartnerMemory)
SHARED = sorted(set(HANDLE) - set(IN_PROCESS_ONLY))


@pytest.mark.parametrize("kind", [AsyncPartnerMemory, MemoryClient, AsyncMemoryClient])
def test_every_interface_has_the_handles_methods_and_no_others(kind: type) -> None:
    methods = set(_methods(kind)) - ALIASES
    if kind is AsyncPartnerMemory:  # in the same process: it has those too
        methods -= set(IN_PROCESS_ONLY)
    assert methods == set(SHARED)


@pytest.mark.parametrize("kind", [AsyncPartnerMemory, MemoryClient, AsyncMemoryClient])
@pytest.mark.parametrize("name", SHARED)
def test_the_same_parameters_defaults_and_results(kind: type, name: str) -> None:
    ours, theirs = HANDLE[name], getattr(kind, name)
    assert _shape(theirs) == _shape(ours)
    assert _returns(theirs) == _returns(ours)
    assert inspect.iscoroutinefunction(theirs) is kind.__name__.startswith("Async")
