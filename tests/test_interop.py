"""Import and export of the reference state directory (design.md section 8)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from partner_memory.core import MemoryCore
from partner_memory.errors import ConflictError, InvalidInputError
from partner_memory.interop import export_partner_state, import_partner_state
from partner_memory.memory import PartnerMemory
from partner_memory.store import MemoryStore
from tests.conftest import FakeClock

EXAMPLE = Path(__file__).parent.parent / "examples" / "partner-state"


def write_state(root: Path, session: Any, units: dict[str, Any], unit_set: Any = None) -> Path:
    (root / "core" / "memory").mkdir(parents=True, exist_ok=True)
    core = {
        "memory_session_id": session,
        "memory_unit_uuid_set": list(units) if unit_set is None else unit_set,
    }
    (root / "core" / "memory.json").write_text(json.dumps(core, ensure_ascii=False), "utf-8")
    for unit_id, doc in units.items():
        path = root / "core" / "memory" / f"memory-unit{unit_id}.json"
        path.write_text(json.dumps(doc, ensure_ascii=False), "utf-8")
    return root


def read_tree(root: Path) -> dict[str, Any]:
    return {
        str(p.relative_to(root)): json.loads(p.read_text("utf-8"))
        for p in sorted(root.rglob("*.json"))
    }


def messy_state(root: Path) -> Path:
    """A state directory that triggers every skip and normalisation rule."""
    unit = {
        "id": "u1",
        "update_timestamp": 0,
        "conversation_messages": [
            {"role": "user", "content": "keep 0"},
            {"role": "user"},
            {"content": "no role"},
            None,
            {"role": None, "content": "null role"},
            {"role": "assistant", "content": "keep 1"},
            {"role": "user", "content": "keep 2"},
        ],
        "memory_slices": [
            {
                "id": "late",
                "start_index": 1,
                "end_index": 99,
                "summary": "l",
                "created_timestamp": 50,
            },
            None,
            {"id": "no-summary", "start_index": 0, "end_index": 1, "created_timestamp": 5},
            {"id": "", "start_index": -4, "end_index": 1, "summary": "e", "created_timestamp": 0},
            {
                "id": "backwards",
                "start_index": 2,
                "end_index": 1,
                "summary": "b",
                "created_timestamp": 7,
            },
        ],
    }
    return write_state(root, "u1", {"u1": unit})


def test_skip_rules_and_normalisation(store: MemoryStore, tmp_path: Path) -> None:
    clock = FakeClock(start=1_000)
    report = import_partner_state(store, messy_state(tmp_path), namespace="ns", clock=clock)
    assert report.units_created == 1
    assert report.messages_added == 3
    assert len(report.skipped) == 5  # four messages, one slice lacking a field
    assert any("memory_slices[2]" in note for note in report.skipped)
    assert any("null slice" in note for note in report.normalised)
    core = MemoryCore(store, "ns", create=False)
    unit = core.get_memory_unit("u1")
    assert [m.content for m in unit.conversation_messages] == ["keep 0", "keep 1", "keep 2"]
    assert unit.timestamp == 1_001  # update_timestamp 0 -> now
    ranges = [(s.start_index, s.end_index, s.timestamp) for s in unit.slices]
    assert ranges == [(2, 3, 7), (1, 3, 50), (0, 1, 1_001)]
    assert unit.slices[2].id  # empty id replaced
    assert core.memory_session_id == "u1"


def test_normalised_import_exports_what_it_stored(store: MemoryStore, tmp_path: Path) -> None:
    import_partner_state(store, messy_state(tmp_path / "state"), namespace="ns")
    export_partner_state(MemoryCore(store, "ns"), tmp_path / "out")
    report = import_partner_state(store, tmp_path / "out", namespace="copy")
    assert (report.skipped, report.normalised) == ([], [])
    assert MemoryCore(store, "copy").get_memory_unit("u1").slices == (
        MemoryCore(store, "ns").get_memory_unit("u1").slices
    )
    exported = read_tree(tmp_path / "out")["core/memory/memory-unitu1.json"]
    assert [m["content"] for m in exported["conversation_messages"]] == [
        "keep 0",
        "keep 1",
        "keep 2",
    ]


def test_import_is_idempotent(store: MemoryStore, tmp_path: Path) -> None:
    state = messy_state(tmp_path / "state")
    import_partner_state(store, state, namespace="ns")
    before = MemoryCore(store, "ns").get_memory_unit("u1")
    again = import_partner_state(store, state, namespace="ns")
    assert not again.changed
    assert again.units_unchanged == 1
    assert MemoryCore(store, "ns").get_memory_unit("u1") == before


def test_round_trip_reproduces_json(store: MemoryStore, tmp_path: Path) -> None:
    import_partner_state(store, EXAMPLE, namespace="agent")
    out = tmp_path / "out"
    report = export_partner_state(MemoryCore(store, "agent"), out)
    assert report.units == 3
    assert read_tree(out) == read_tree(EXAMPLE)


def test_cognition_window_adopts_the_units_ids(store: MemoryStore, tmp_path: Path) -> None:
    """The window's repeat of the unit's newest message is the same message, not a copy."""
    from partner_memory.memory import PartnerMemory

    report = import_partner_state(store, EXAMPLE, namespace="agent")
    assert report.trajectory_replaced == 2
    core = MemoryCore(store, "agent")
    unit_id = core.memory_session_id
    window = store.load_trajectory("agent").messages
    assert window[0].id == core.read_messages(unit_id)[2].id
    assert not import_partner_state(store, EXAMPLE, namespace="agent").changed
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        result = memory.roll_now()
    assert result is not None
    assert [m.content for m in result.increment_messages] == [window[1].content]
    assert core.get_unit_info(unit_id).message_count == 4


def test_import_extends_a_unit_the_reference_kept_writing(
    store: MemoryStore, tmp_path: Path
) -> None:
    state = shutil.copytree(EXAMPLE, tmp_path / "state")
    import_partner_state(store, state, namespace="agent")
    unit_file = state / "core" / "memory" / "memory-unitc7a1f0d2-8e6b-4c3a-b9d5-6e2f4a8c0b33.json"
    doc = json.loads(unit_file.read_text("utf-8"))
    doc["conversation_messages"].append({"role": "user", "content": "one more"})
    doc["memory_slices"].append(
        {
            "id": "new",
            "start_index": 3,
            "end_index": 4,
            "summary": "more",
            "created_timestamp": 1715300000001,
        }
    )
    doc["update_timestamp"] = 1715300000001
    unit_file.write_text(json.dumps(doc, ensure_ascii=False), "utf-8")
    report = import_partner_state(store, state, namespace="agent")
    assert (report.units_extended, report.messages_added, report.slices_added) == (1, 1, 1)
    out = tmp_path / "out"
    export_partner_state(MemoryCore(store, "agent"), out)
    assert read_tree(out) == read_tree(state)


def test_conflicting_unit_imports_nothing(store: MemoryStore, tmp_path: Path) -> None:
    state = shutil.copytree(EXAMPLE, tmp_path / "state")
    import_partner_state(store, state, namespace="agent")
    before = MemoryCore(store, "agent").get_memory_unit("3f2b8c1e-7a4d-4e0b-9c51-0d2a6b7e8f10")
    unit_file = state / "core" / "memory" / "memory-unit3f2b8c1e-7a4d-4e0b-9c51-0d2a6b7e8f10.json"
    doc = json.loads(unit_file.read_text("utf-8"))
    doc["conversation_messages"][1]["content"] = "rewritten history"
    unit_file.write_text(json.dumps(doc), "utf-8")
    with pytest.raises(ConflictError, match="message 1"):
        import_partner_state(store, state, namespace="agent")
    assert MemoryCore(store, "agent").get_memory_unit(before.id) == before


def test_import_into_separate_namespaces(store: MemoryStore) -> None:
    import_partner_state(store, EXAMPLE, namespace="alice")
    import_partner_state(store, EXAMPLE, namespace="bob")
    alice, bob = MemoryCore(store, "alice"), MemoryCore(store, "bob")
    assert alice.unit_ids() == bob.unit_ids()
    alice.update_memory_unit([], "only alice")
    assert alice.list_units().units[0].slice_count == 2
    assert bob.list_units().units[0].slice_count == 1


BAD_STATES: list[tuple[str, Any, str]] = [
    ("missing core file", None, r"core/memory\.json: file is missing"),
    ("bad json", "{not json", r"core/memory\.json: invalid JSON at line 1"),
    ("core not object", [], r"core/memory\.json must be dict"),
    ("no session", {"memory_unit_uuid_set": []}, "memory_session_id' is missing"),
    ("no unit set", {"memory_session_id": "s"}, "memory_unit_uuid_set' is missing"),
    ("session wrong type", {"memory_session_id": 3, "memory_unit_uuid_set": []}, "must be str"),
    (
        "unit set wrong type",
        {"memory_session_id": "s", "memory_unit_uuid_set": "u"},
        "must be list",
    ),
    (
        "unit id wrong type",
        {"memory_session_id": "s", "memory_unit_uuid_set": [1]},
        r"\[0\] must be str",
    ),
    (
        "unit id is a path",
        {"memory_session_id": "s", "memory_unit_uuid_set": ["../x"]},
        "file name",
    ),
    (
        "missing unit file",
        {"memory_session_id": "s", "memory_unit_uuid_set": ["gone"]},
        "memory-unitgone.json: file is missing",
    ),
]


@pytest.mark.parametrize(("label", "core", "message"), BAD_STATES, ids=[b[0] for b in BAD_STATES])
def test_bad_core_file_is_named_and_nothing_stored(
    store: MemoryStore, tmp_path: Path, label: str, core: Any, message: str
) -> None:
    (tmp_path / "core").mkdir()
    if core is not None:
        text = core if isinstance(core, str) else json.dumps(core)
        (tmp_path / "core" / "memory.json").write_text(text, "utf-8")
    with pytest.raises(InvalidInputError, match=message):
        import_partner_state(store, tmp_path, namespace="ns")
    assert store.get_namespace("ns") is None


BAD_UNITS: list[tuple[str, Any, str]] = [
    ("id mismatch", {"id": "other"}, "names 'u'"),
    ("timestamp wrong type", {"update_timestamp": "now"}, "update_timestamp' must be int"),
    ("messages not a list", {"conversation_messages": {}}, "conversation_messages' must be list"),
    (
        "content wrong type",
        {"conversation_messages": [{"role": "user", "content": 1}]},
        r"\[0\]\.content must be str",
    ),
    (
        "unknown role",
        {"conversation_messages": [{"role": "tool", "content": "x"}]},
        r"\[0\]\.role must be one of",
    ),
    ("NUL in content", {"conversation_messages": [{"role": "user", "content": "a\u0000"}]}, "NUL"),
    (
        "negative index type",
        {
            "memory_slices": [
                {
                    "id": "s",
                    "start_index": "0",
                    "end_index": 1,
                    "summary": "",
                    "created_timestamp": 1,
                }
            ]
        },
        "start_index must be int",
    ),
    ("slice not object", {"memory_slices": ["s"]}, r"memory_slices\[0\] must be dict"),
]


@pytest.mark.parametrize(("label", "fields", "message"), BAD_UNITS, ids=[b[0] for b in BAD_UNITS])
def test_bad_unit_file_is_named_and_nothing_stored(
    store: MemoryStore, tmp_path: Path, label: str, fields: dict[str, Any], message: str
) -> None:
    good = {"id": "good", "update_timestamp": 1, "conversation_messages": [], "memory_slices": []}
    bad = {"id": "u", "update_timestamp": 1} | fields
    write_state(tmp_path, "u", {"good": good, "u": bad})
    with pytest.raises(InvalidInputError, match=message) as caught:
        import_partner_state(store, tmp_path, namespace="ns")
    assert "memory-unitu.json" in str(caught.value)
    assert store.get_namespace("ns") is None


def test_missing_state_dir(store: MemoryStore, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        import_partner_state(store, tmp_path / "nowhere", namespace="ns")


def test_export_refuses_a_file_target(store: MemoryStore, tmp_path: Path) -> None:
    import_partner_state(store, EXAMPLE, namespace="agent")
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(InvalidInputError, match="not a directory"):
        export_partner_state(MemoryCore(store, "agent"), target)


def test_bad_cognition_file_is_named_and_nothing_stored(store: MemoryStore, tmp_path: Path) -> None:
    state = shutil.copytree(EXAMPLE, tmp_path / "state")
    (state / "core" / "cognition.json").write_text('{"chat_messages": {"role": "user"}}', "utf-8")
    with pytest.raises(
        InvalidInputError, match=r"core/cognition\.json: field 'chat_messages' must be list"
    ):
        import_partner_state(store, state, namespace="ns")
    assert store.get_namespace("ns") is None


def _minimal_state(root: Path, session: str = "s1") -> None:
    (root / "core" / "memory").mkdir(parents=True)
    (root / "core" / "memory.json").write_text(
        json.dumps({"memory_session_id": session, "memory_unit_uuid_set": ["u1"]})
    )
    (root / "core" / "memory" / "memory-unitu1.json").write_text(
        json.dumps(
            {"id": "u1", "update_timestamp": 5, "conversation_messages": [], "memory_slices": []}
        )
    )


@pytest.mark.parametrize("session", ["", "../../x", "a\x00b", " "])
def test_unusable_session_ids_are_refused(store: MemoryStore, tmp_path: Path, session: str) -> None:
    _minimal_state(tmp_path, session)
    with pytest.raises(InvalidInputError, match="memory_session_id"):
        import_partner_state(store, tmp_path, namespace="agent")
    assert store.get_namespace("agent") is None


def test_fifo_devices_and_links_out_are_refused(store: MemoryStore, tmp_path: Path) -> None:
    """Nothing outside the directory is followed, and nothing that never ends is read."""
    import os

    _minimal_state(tmp_path)
    unit = tmp_path / "core" / "memory" / "memory-unitu1.json"
    unit.unlink()
    os.mkfifo(unit)
    with pytest.raises(InvalidInputError, match="not a regular file"):
        import_partner_state(store, tmp_path, namespace="agent")
    unit.unlink()
    unit.symlink_to("/dev/zero")
    with pytest.raises(InvalidInputError, match="links outside the state directory"):
        import_partner_state(store, tmp_path, namespace="agent")
    unit.unlink()
    outside = tmp_path.parent / f"{tmp_path.name}-outside.json"
    outside.write_text("{}")
    unit.symlink_to(outside)
    with pytest.raises(InvalidInputError, match="links outside"):
        import_partner_state(store, tmp_path, namespace="agent")
    assert store.get_namespace("agent") is None


def test_hostile_unit_files_are_one_clear_error(store: MemoryStore, tmp_path: Path) -> None:
    _minimal_state(tmp_path)
    unit = tmp_path / "core" / "memory" / "memory-unitu1.json"
    slice_ = {"id": "x", "start_index": 0, "end_index": 0, "summary": "s", "created_timestamp": 5}
    cases = [
        ("[" * 100_000, "nested too deeply"),
        (json.dumps({"id": "u1", "update_timestamp": 10**30}), "between 1970"),
        (
            json.dumps({"id": "u1", "memory_slices": [dict(slice_, created_timestamp=10**30)]}),
            "between 1970",
        ),
        (json.dumps({"id": "u1", "memory_slices": [slice_, slice_]}), "repeats memory_slices"),
        (
            '{"id": "u1", "memory_slices": [{"id": "\\ud800", "start_index": 0, "end_index": 0,'
            ' "summary": "s", "created_timestamp": 5}]}',
            "not valid Unicode",
        ),
    ]
    for text, problem in cases:
        unit.write_text(text)
        with pytest.raises(InvalidInputError, match=problem):
            import_partner_state(store, tmp_path, namespace="agent")
    assert store.get_namespace("agent") is None


def test_a_unit_named_cognition_keeps_the_window(store: MemoryStore, tmp_path: Path) -> None:
    """Window ids are derived apart from every unit's, whatever the unit is called."""
    (tmp_path / "core" / "memory").mkdir(parents=True)
    (tmp_path / "core" / "memory.json").write_text(
        json.dumps({"memory_session_id": "s1", "memory_unit_uuid_set": ["cognition"]})
    )
    talk = [{"role": "user", "content": f"stored {i}"} for i in range(2)]
    (tmp_path / "core" / "memory" / "memory-unitcognition.json").write_text(
        json.dumps({"id": "cognition", "update_timestamp": 5, "conversation_messages": talk})
    )
    window = [{"role": "user", "content": f"window {i}"} for i in range(3)]
    (tmp_path / "core" / "cognition.json").write_text(json.dumps({"chat_messages": window}))
    import_partner_state(store, tmp_path, namespace="agent")
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        result = memory.roll_now()
        assert result is not None
        assert [m.content for m in result.increment_messages] == [f"window {i}" for i in range(3)]


def test_window_with_unrolled_messages_is_not_replaced_silently(
    store: MemoryStore, tmp_path: Path
) -> None:
    _minimal_state(tmp_path)
    (tmp_path / "core" / "cognition.json").write_text(
        json.dumps({"chat_messages": [{"role": "user", "content": "from the file"}]})
    )
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        memory.record_turn("recorded here", "and not rolled")
    with pytest.raises(ConflictError, match="would drop 2 message"):
        import_partner_state(store, tmp_path, namespace="agent")
    assert len(store.load_trajectory("agent").messages) == 2
    report = import_partner_state(store, tmp_path, namespace="agent", replace_window=True)
    assert report.trajectory_replaced == 1
