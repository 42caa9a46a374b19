"""A bad-input matrix for the library, on every backend.

Each case must raise the documented error class with a message naming what
is wrong (one line), and leave stored memory exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from partner_memory import (
    ConfigurationError,
    InvalidInputError,
    MemoryCore,
    Message,
    NotFoundError,
    PartnerMemory,
    PartnerMemoryError,
    RollingSettings,
)
from partner_memory.store import MemoryStore

Case = Callable[[PartnerMemory], object]


def _state(memory: PartnerMemory) -> tuple[Any, ...]:
    core = memory.core
    units = [(u, core.get_unit_info(u), tuple(core.list_slices(u))) for u in core.unit_ids()]
    window = memory.core.store.load_trajectory(memory.namespace)
    return tuple(units), tuple(m.id for m in window.messages), window.last_interaction


def _twice(memory: PartnerMemory) -> None:
    same = Message(role="user", content="x")
    memory.record_messages([same, same])


def _stored_again(memory: PartnerMemory) -> None:
    unit = memory.core.unit_ids()[0]
    stored = memory.core.read_messages(unit)[0]
    memory.record_messages([stored])


CASES: list[tuple[str, Case, type[PartnerMemoryError], str]] = [
    ("unknown role", lambda m: Message(role="robot", content="x"), InvalidInputError, "role"),  # type: ignore[arg-type]
    (
        "content not text",
        lambda m: Message(role="user", content=None),
        InvalidInputError,
        "content",
    ),  # type: ignore[arg-type]
    (
        "metadata not JSON",
        lambda m: Message(role="user", content="x", metadata={"a": object()}),
        InvalidInputError,
        "metadata",
    ),
    (
        "huge timestamp",
        lambda m: Message(role="user", content="x", timestamp=10**30),
        InvalidInputError,
        "between 1970",
    ),
    ("None in a batch", lambda m: m.record_messages([None]), InvalidInputError, r"messages\[0\]"),  # type: ignore[list-item]
    ("NUL in a turn", lambda m: m.record_turn("a\x00b", "ok"), InvalidInputError, "NUL"),
    ("lone surrogate", lambda m: m.record_turn("a\ud800", "ok"), InvalidInputError, "Unicode"),
    (
        "negative turn time",
        lambda m: m.record_turn("a", "b", timestamp=-5),
        InvalidInputError,
        "timestamp",
    ),
    ("id twice in a batch", _twice, InvalidInputError, "twice"),
    ("id already stored", _stored_again, InvalidInputError, "already stored"),
    (
        "summary not text",
        lambda m: m.core.update_memory_unit([], "\ud800"),
        InvalidInputError,
        "summary",
    ),
    (
        "negative range",
        lambda m: m.core.read_messages(m.core.unit_ids()[0], -1),
        InvalidInputError,
        "negative",
    ),
    ("page of zero", lambda m: m.core.list_units(limit=0), InvalidInputError, "limit"),
    ("unknown unit", lambda m: m.core.get_memory_slice("nope", "x"), NotFoundError, "nope"),
    (
        "unknown namespace",
        lambda m: MemoryCore(m.core.store, "ghost", create=False),
        NotFoundError,
        "ghost",
    ),
    ("blank namespace", lambda m: MemoryCore(m.core.store, " "), InvalidInputError, "blank"),
    (
        "control characters",
        lambda m: MemoryCore(m.core.store, "a\nb"),
        InvalidInputError,
        "control",
    ),
    (
        "settings of the wrong type",
        lambda m: RollingSettings(max_messages="72"),
        ConfigurationError,
        "max_messages",
    ),  # type: ignore[arg-type]
    (
        "roll through a stranger",
        lambda m: m.roll_now(through="not-in-window"),
        InvalidInputError,
        "not in the window",
    ),
    (
        "offset beyond any store",
        lambda m: m.core.store.list_units(m.namespace, limit=5, offset=2**70),
        InvalidInputError,
        "too large|out of range",
    ),
]


@pytest.mark.parametrize(("name", "case", "error", "says"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(
    store: MemoryStore,
    name: str,
    case: Case,
    error: type[PartnerMemoryError],
    says: str,
) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        memory.record_turn("I'm off to Kyoto in April.", "Book early.")
        memory.roll_now()
        memory.record_turn("No seafood for me.", "Noted.")
        before = _state(memory)
        with pytest.raises(error, match=says) as caught:
            case(memory)
        assert "\n" not in str(caught.value), "an error is one line"
        assert _state(memory) == before
