"""Validation of the value objects: bad values name the field and never reach a store."""

from __future__ import annotations

import inspect

import pytest

import partner_memory
from partner_memory.errors import InvalidInputError
from partner_memory.model import Message, check_namespace


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"role": "user", "content": 5}, "content"),
        ({"role": "user", "content": "a\x00b"}, "NUL"),
        ({"role": "user", "content": "\ud800"}, "Unicode"),
        ({"role": "user", "content": "x", "id": ""}, "id"),
        ({"role": "user", "content": "x", "timestamp": "soon"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": True}, "timestamp"),
        ({"role": "user", "content": "x", "metadata": ["a"]}, "metadata"),
        ({"role": "user", "content": "x", "metadata": {"f": float("nan")}}, "metadata"),
        ({"role": "user", "content": "x", "metadata": {"o": object()}}, "metadata"),
    ],
)
def test_bad_message_fields_are_named(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInputError, match=field):
        Message(**kwargs)  # type: ignore[arg-type]


def test_messages_get_distinct_ids() -> None:
    assert Message(role="user", content="a").id != Message(role="user", content="a").id


@pytest.mark.parametrize("name", ["", "   ", "a\nb", "x" * 201, 7])
def test_bad_namespaces(name: object) -> None:
    with pytest.raises(InvalidInputError, match="namespace"):
        check_namespace(name)


def test_namespace_accepts_unicode() -> None:
    assert check_namespace("agent/小林 🙂") == "agent/小林 🙂"


def test_public_api_is_explicit() -> None:
    public = {
        name
        for name, value in vars(partner_memory).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == set(partner_memory.__all__)
    assert {"MemoryCore", "MemoryUnit", "MemorySlice", "Message", "open_store"} <= public


def test_message_ids_are_time_ordered_uuid7() -> None:
    import time
    import uuid

    first = Message(role="user", content="a").id
    time.sleep(0.002)
    second = Message(role="user", content="b").id
    parsed = uuid.UUID(first)
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    assert first < second
