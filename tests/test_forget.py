"""Forgetting, on every backend: the text leaves every path, each forget is one
transaction, recorded without its content, and other processes follow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from partner_memory import Message, NotFoundError, PartnerMemory
from partner_memory.cli import app
from partner_memory.interop import export_partner_state
from partner_memory.store import MemoryStore

SECRET = "quokkaword"  # letters no id, hex or time can contain
START = 1_700_000_000_000


def _converse(memory: PartnerMemory) -> list[Message]:
    said = [
        Message("user", "We booked the hotel in Kyoto", timestamp=START),
        Message("user", f"My bank PIN is {SECRET}, keep it safe", timestamp=START + 1000),
        Message("assistant", "I will not repeat it", timestamp=START + 2000),
        Message("user", "The flight leaves at nine", timestamp=START + 3000),
    ]
    memory.record_messages(said, interaction=START + 3000)
    memory.roll_now()
    memory.wait()
    return said


def _everywhere(memory: PartnerMemory, tmp_path: Path) -> str:
    """Every path text leaves memory by: rows, window, recall, context, an export."""
    store, ns = memory.core.store, memory.namespace
    seen = [repr(store.export_namespace(ns))]
    # a probe: it must not leave its own query (which holds the secret) in the context
    probe = memory.recall(f"bank PIN {SECRET}", k=20, activate=False)
    seen += [h.message.content for h in probe.hits]
    seen.append(memory.context_xml())
    out = tmp_path / "export"
    export_partner_state(memory.core, out)
    seen += [p.read_text("utf-8") for p in out.rglob("*.json")]
    return "\n".join(seen)


def test_a_forgotten_message_is_on_no_path_and_its_slice_is_summarised_again(
    store: MemoryStore, tmp_path: Path
) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        said = _converse(memory)
        memory.recall("bank PIN")  # an activated block holding it, to be dropped too
        assert SECRET in _everywhere(memory, tmp_path / "before")
        assert memory.forget_messages([said[1].id]) == 1
        assert SECRET not in _everywhere(memory, tmp_path / "after")
        (unit,) = memory.core.unit_ids()
        kept = memory.core.read_messages(unit)
        assert [m.id for m in kept] == [m.id for m in said]  # positions and ids stay
        assert kept[1].content == ""
        assert kept[1].metadata == {"forgotten": True}
        (summary,) = memory.core.list_slices(unit)
        assert "Kyoto" in summary.summary  # summarised again from what remains
        assert next(h.message.id for h in memory.recall("flight nine").hits) == said[3].id
        assert [entry[:2] for entry in store.forget_log("agent")] == [("message", said[1].id)]


def test_forgetting_a_window_message_and_a_whole_slice(store: MemoryStore, tmp_path: Path) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        said = _converse(memory)
        late = Message("user", f"New PIN {SECRET}s", timestamp=START + 5000)
        memory.record_messages([late])
        assert memory.forget_messages([late.id]) == 1
        assert list(memory.trajectory.snapshot()) == []
        (unit,) = memory.core.unit_ids()
        (held,) = memory.core.list_slices(unit)
        assert memory.forget_slice(unit, held.id) == len(said)
        assert SECRET not in _everywhere(memory, tmp_path)
        assert "Kyoto" not in _everywhere(memory, tmp_path / "again")
        assert memory.core.list_slices(unit)[0].summary == ""
        with pytest.raises(NotFoundError):
            memory.forget_messages(["never-stored"])


def test_forgetting_a_unit_and_a_namespace(store: MemoryStore, tmp_path: Path) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _converse(memory)
        (unit,) = memory.core.unit_ids()
        memory.forget_unit(unit)
        assert memory.core.unit_ids() == []
        info = store.get_namespace("agent")
        assert info is not None
        assert (info.unit_count, info.slice_count) == (0, 0)
        assert SECRET not in _everywhere(memory, tmp_path)
        memory.service.forget_namespace("agent")
    assert store.get_namespace("agent") is None
    kinds = [kind for kind, _, _ in store.forget_log("agent")]
    assert kinds == ["namespace", "unit"]


def test_another_process_drops_what_was_forgotten_from_its_context(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as first:
        said = _converse(first)
        with PartnerMemory(store, "agent", idle_timer=False) as second:
            assert SECRET in second.context_xml()  # its dialog_history block
            first.forget_messages([said[1].id])
            assert SECRET not in second.context_xml()
            assert "Kyoto" in second.context_xml()


def test_a_failed_forget_changes_nothing(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from partner_memory.store.memory import extras as memory_extras
    from partner_memory.store.memory.store import InMemoryStore
    from partner_memory.store.sql.forget import ForgetSql

    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        said = _converse(memory)
        before = store.export_namespace("agent")

        def crash(*args: object) -> None:
            raise RuntimeError("power cut")

        if isinstance(store, InMemoryStore):  # the last step before the forget is recorded
            monkeypatch.setattr(memory_extras, "_forget_records", crash)
        else:
            monkeypatch.setattr(ForgetSql, "_record", crash)
        with pytest.raises(RuntimeError):
            memory.forget_messages([said[1].id])
        assert store.export_namespace("agent") == before
        assert store.forget_log("agent") == []


def test_cli_forget(store_url: str) -> None:
    from partner_memory.store import open_store

    store = open_store(store_url)
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        said = _converse(memory)
    store.close()
    runner = CliRunner()
    done = runner.invoke(app, ["forget", "message", said[1].id, "--db", store_url, "-n", "agent"])
    assert done.exit_code == 0, done.output
    assert "forgot 1 message" in done.output
    found = runner.invoke(app, ["recall", SECRET, "--db", store_url, "-n", "agent", "--json"])
    assert found.exit_code == 0, found.output
    hits = json.loads(found.output)["hits"]  # what is nearest by meaning, never the forgotten
    assert said[1].id not in {h["message"]["id"] for h in hits}
    assert not any(SECRET in h["message"]["content"] for h in hits)
    refused = runner.invoke(app, ["forget", "namespace", "--db", store_url, "-n", "agent"])
    assert refused.exit_code == 4
    assert "--yes" in refused.output
    gone = runner.invoke(app, ["forget", "namespace", "--yes", "--db", store_url, "-n", "agent"])
    assert gone.exit_code == 0, gone.output
    assert runner.invoke(app, ["units", "--db", store_url, "-n", "agent"]).exit_code == 3


def test_a_forget_killed_midway_leaves_everything_as_it_was(store_url: str, tmp_path: Path) -> None:
    """SIGKILL inside the forgetting transaction (every change made, none committed): the
    text is still on every path and no forget is recorded; done again, it is gone."""
    import signal
    import subprocess
    import sys

    from partner_memory.store import open_store

    store = open_store(store_url)
    try:
        with PartnerMemory(store, "agent", idle_timer=False) as memory:
            said = _converse(memory)
            before = store.export_namespace("agent")
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.forget_worker", store_url, said[1].id],
            cwd=Path(__file__).resolve().parent.parent,
            stdout=subprocess.PIPE,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"inside"
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        assert store.export_namespace("agent") == before
        assert store.forget_log("agent") == []
        with PartnerMemory(store, "agent", idle_timer=False) as memory:
            assert SECRET in _everywhere(memory, tmp_path / "after-kill")
            memory.forget_messages([said[1].id])
            assert SECRET not in _everywhere(memory, tmp_path / "done")
        assert [kind for kind, _, _ in store.forget_log("agent")] == ["message"]
    finally:
        store.close()
