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
    MemoryService,
    MemorySlice,
    Message,
    NotFoundError,
    PartnerMemory,
    PartnerMemoryError,
    RollingSettings,
)
from partner_memory.store import MemoryStore
from partner_memory.store.contract.base import UnitQuery

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
        "lone surrogate in metadata",
        lambda m: m.record_messages(
            [Message(role="user", content="x", metadata={"tags": ["a\ud800"]})]
        ),
        InvalidInputError,
        "metadata is not valid Unicode",
    ),
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
        "messages as None",
        lambda m: m.record_messages(None),  # type: ignore[arg-type]
        InvalidInputError,
        "list of Message, got NoneType",
    ),
    (
        "a bare Message",
        lambda m: m.record_messages(Message(role="user", content="x")),  # type: ignore[arg-type]
        InvalidInputError,
        "list of Message, got Message",
    ),
    (
        "metadata not an object",
        lambda m: Message(role="user", content="x", metadata="abc"),  # type: ignore[arg-type]
        InvalidInputError,
        "metadata must be a JSON object",
    ),
    (
        "metadata key not text",
        lambda m: Message(role="user", content="x", metadata={1: "x"}),  # type: ignore[dict-item]
        InvalidInputError,
        "keys must be strings",
    ),
    (
        "empty message id",
        lambda m: Message(role="user", content="x", id=""),
        InvalidInputError,
        "id",
    ),
    (
        "empty slice id",
        lambda m: MemorySlice(id="", start_index=0, end_index=0, summary="", timestamp=1),
        InvalidInputError,
        "slice id",
    ),
    (
        "slice range backwards",
        lambda m: MemorySlice(id="s", start_index=3, end_index=1, summary="", timestamp=1),
        InvalidInputError,
        "start <= end",
    ),
    (
        "summarizers not a list",
        lambda m: MemoryService(m.core.store, summarizers=5),  # type: ignore[arg-type]
        InvalidInputError,
        "summarizers must be a list",
    ),
    (
        "a summarizer that cannot summarize",
        lambda m: MemoryService(m.core.store, summarizers=[5]),  # type: ignore[list-item]
        InvalidInputError,
        r"summarizers\[0\]",
    ),
    (
        "units since a word",
        lambda m: m.core.list_units(since="abc"),  # type: ignore[arg-type]
        InvalidInputError,
        "since must be an integer",
    ),
    (
        "unknown context domain",
        lambda m: m.context(["NOPE"]),
        InvalidInputError,
        "unknown domain 'NOPE'",
    ),
    (
        "offset beyond any store",
        lambda m: m.core.store.list_units(m.namespace, UnitQuery(limit=5, offset=2**70)),
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


def test_an_empty_namespace_is_refused_never_read_as_the_default(tmp_path: Any) -> None:
    """A blank namespace - an empty variable, an empty argument - is refused with the
    reason; it never opens the `default` namespace."""
    import os
    import subprocess
    import sys

    from partner_memory import ConfigurationError, InvalidInputError, PartnerMemory
    from partner_memory.client import MemoryClient
    from partner_memory.settings import StoreSettings

    database = str(tmp_path / "memory.db")
    with PartnerMemory.open(database) as memory:
        memory.record_turn("I'm off to Kyoto", "Noted")
        assert memory.namespace == "default"
    for blank in ("", "  "):
        with pytest.raises(ConfigurationError, match="PARTNER_MEMORY_NAMESPACE"):
            StoreSettings.from_env({"PARTNER_MEMORY_NAMESPACE": blank})
        with pytest.raises(InvalidInputError, match="blank"):
            PartnerMemory.open(database, blank)
        with pytest.raises(InvalidInputError, match="blank"):
            MemoryClient("http://127.0.0.1:9", blank)
    env = dict(os.environ, PARTNER_MEMORY_NAMESPACE="")
    answer = subprocess.run(
        [sys.executable, "-m", "partner_memory", "window", "--db", database],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert answer.returncode != 0
    assert "PARTNER_MEMORY_NAMESPACE" in answer.stderr
    assert "Kyoto" not in answer.stdout
