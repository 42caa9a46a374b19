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
    exported = set(partner_memory.__all__)
    assert exported <= set(dir(partner_memory))
    assert not any(inspect.ismodule(getattr(partner_memory, name)) for name in exported)
    public = {
        name
        for name, value in vars(partner_memory).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == exported  # every name resolved above, and nothing else
    assert {"MemoryCore", "MemoryUnit", "MemorySlice", "Message", "open_store"} <= public
    with pytest.raises(AttributeError, match="no attribute 'MemoryCores'"):
        partner_memory.MemoryCores  # noqa: B018


def test_a_part_of_the_package_loads_without_the_rest() -> None:
    """The analysis worker an ingest starts imports what it uses, not the package's
    every part (its start is paid by the ingest)."""
    import subprocess
    import sys

    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, partner_memory.recall.analysis_child;"
            " print(' '.join(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for heavy in ("openai", "fastapi", "tantivy", "wordllama", "partner_memory.service"):
        assert heavy not in loaded
    from partner_memory import Message as exported

    assert exported is Message


def test_message_ids_are_time_ordered_uuid7() -> None:
    import time
    import uuid

    first = Message(role="user", content="a").id
    time.sleep(0.002)
    second = Message(role="user", content="b").id
    parsed = uuid.UUID(first)
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    assert first < second


def test_ids_drawn_after_a_fork_differ_from_the_parents() -> None:
    """Ids come from a generator in memory: a forked child must not repeat the parent's."""
    import os
    import uuid

    from partner_memory.model import new_id, new_message_id

    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        os.write(writer, f"{new_id()} {new_message_id()}".encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(child, 0)
    theirs = os.read(reader, 200).decode().split()
    os.close(reader)
    ours = [new_id(), new_message_id()]
    assert uuid.UUID(ours[0]).version == 4
    assert theirs[0] != ours[0]
    assert theirs[1][-20:] != ours[1][-20:]  # the random part; the time part may agree


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"retain_divisor": 0}, "retain_divisor must be at least 1"),
        ({"idle_after_ms": float("nan")}, "idle_after_ms must be an integer"),
        ({"lease_ttl_s": float("inf")}, "finite"),
        ({"max_messages": "72"}, "max_messages must be an integer"),
        ({"max_messages": True}, "max_messages must be an integer"),
        ({"replace_fade": None}, "replace_fade must be a number"),
    ],
)
def test_rolling_settings_refuse_what_cannot_work(options: dict[str, object], problem: str) -> None:
    from partner_memory import ConfigurationError, RollingSettings

    with pytest.raises(ConfigurationError, match=problem):
        RollingSettings(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize("timestamp", [10**30, -1, 2**63])
def test_timestamps_out_of_range_are_invalid_input(timestamp: int) -> None:
    with pytest.raises(InvalidInputError, match="between 1970 and 9999"):
        Message(role="user", content="x", timestamp=timestamp)


def test_open_store_refuses_a_non_path() -> None:
    from partner_memory import ConfigurationError, open_store

    with pytest.raises(ConfigurationError, match="path or URL"):
        open_store(None)  # type: ignore[arg-type]


def test_one_settings_object_reads_the_whole_environment() -> None:
    from partner_memory import ConfigurationError, Settings

    env = {
        "PARTNER_MEMORY_DB": "/tmp/x.db",
        "PARTNER_MEMORY_LLM_BASE_URL": "http://127.0.0.1:1/v1",
        "PARTNER_MEMORY_LLM_MODEL": "m",
        "PARTNER_MEMORY_ROLLING_MAX_MESSAGES": "30",
        "PARTNER_MEMORY_ROLLING_IDLE_AFTER_MS": "60000",
        "PARTNER_MEMORY_ROLLING_LEASE_TTL_S": "5.5",
    }
    settings = Settings.from_env(env)
    assert settings.store.database == "/tmp/x.db"
    assert settings.llm is not None
    assert settings.llm.model == "m"
    assert (settings.rolling.max_messages, settings.rolling.idle_after_ms) == (30, 60000)
    assert settings.rolling.lease_ttl_s == 5.5
    assert Settings.from_env({}).llm is None
    with pytest.raises(ConfigurationError, match="PARTNER_MEMORY_ROLLING_MAX_MESSAGES"):
        Settings.from_env({"PARTNER_MEMORY_ROLLING_MAX_MESSAGES": "many"})
    with pytest.raises(ConfigurationError, match="retain_divisor"):
        Settings.from_env({"PARTNER_MEMORY_ROLLING_RETAIN_DIVISOR": "0"})
