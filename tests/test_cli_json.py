"""Every `--json` document follows the one vocabulary of docs/json.md, and says what it says.

The documented key lists are read from docs/json.md itself, so the page and
the output cannot drift apart.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from partner_memory.cli import app
from partner_memory.model import ConsumerStatus, Message, WindowMessage

ROOT = Path(__file__).parent.parent
DOC = (ROOT / "docs" / "json.md").read_text()
EXAMPLE = ROOT / "examples" / "partner-state"
SAMPLE = ROOT / "examples" / "conversation.jsonl"
#: Keys that name lists of stored things; each must hold a list of objects.
THINGS = {
    "units",
    "slices",
    "messages",
    "namespaces",
    "blocks",
    "consumers",
    "transcripts",
    "hits",
}
runner = CliRunner()


def _keys(text: str) -> set[str]:
    """The keys a line of the page names: backticked words outside parentheses."""
    while "(" in text:
        text = re.sub(r"\([^()]*\)", "", text)
    return set(re.findall(r"`([a-z_]+)`", text))


def documented_commands() -> dict[str, set[str]]:
    rows = re.findall(r"^\| `([a-z][a-z-]*(?: [a-z][a-z-]*)*)[^`]*` \| (.+) \|$", DOC, re.MULTILINE)
    return {command: _keys(keys) for command, keys in rows}


def documented_objects() -> dict[str, set[str]]:
    items = re.findall(
        r"^- \*\*([a-z ]+)\*\*[^:]*: (.+?)(?=^- |\n\n)", DOC, re.MULTILINE | re.DOTALL
    )
    return {name: _keys(keys) for name, keys in items}


def check_vocabulary(value: Any, where: str = "$") -> None:
    if isinstance(value, list):
        for i, item in enumerate(value):
            check_vocabulary(item, f"{where}[{i}]")
        return
    if not isinstance(value, dict):
        return
    assert "conversation_messages" not in value, where
    assert not ("memory_session_id" in value and "name" in value), f"{where}: name a namespace"
    for key, item in value.items():
        at = f"{where}.{key}"
        assert re.fullmatch(r"[a-z][a-z_]*", key), at
        if key.endswith("_count"):
            assert isinstance(item, int), at
            assert item >= 0, at
        if key == "timestamp" or key.endswith("_at"):
            assert item is None or isinstance(item, int), at
        if key.endswith("_ms"):
            assert isinstance(item, int | float), at
        if key in THINGS:
            assert isinstance(item, list), f"{at} is a count or an object, not a list"
            assert all(isinstance(x, dict) for x in item), at
        check_vocabulary(item, at)


def run(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert isinstance(document, dict), f"{args[0]}: a document is an object"
    check_vocabulary(document)
    return document


@pytest.fixture
def documents(store_url: str, tmp_path: Path) -> dict[str, dict[str, Any]]:
    """One document per command, over memory holding units, slices and a window."""
    db = ["--db", store_url]
    out: dict[str, dict[str, Any]] = {}
    out["import-partner"] = run("import-partner", str(EXAMPLE), *db, "-n", "agent")
    out["ingest"] = run("ingest", str(SAMPLE), str(SAMPLE), *db, "-n", "agent")
    agent_file = tmp_path / "agent.af"
    agent_file.write_text(json.dumps({"agents": [{"id": "a", "name": "lettuce"}], "blocks": []}))
    out["import"] = run("import", str(agent_file), "--from", "letta-agent-file", *db, "-n", "agent")
    out["units"] = run("units", *db, "-n", "agent", "--limit", "2")
    unit = out["units"]["units"][0]["id"]
    out["show"] = run("show", unit, "--messages", *db, "-n", "agent")
    slice_id = out["show"]["slices"][0]["id"]
    out["slice"] = run("slice", unit, slice_id, *db, "-n", "agent")
    out["namespaces"] = run("namespaces", *db)
    out["session"] = run("session", *db, "-n", "agent")
    out["context"] = run("context", *db, "-n", "agent")
    out["window"] = run("window", *db, "-n", "agent")
    out["recall"] = run("recall", "budget trip", *db, "-n", "agent")
    out["topics"] = run("topics", *db, "-n", "agent")  # offline: an empty list
    out["stats"] = run("stats", *db, "-n", "agent")
    out["export-partner"] = run("export-partner", str(tmp_path / "out"), *db, "-n", "agent")
    out["copy"] = run("copy", store_url, str(tmp_path / "copy.db"))
    out["reindex"] = run("reindex", *db, "-n", "agent")
    # what changes memory, on a namespace of its own
    spare = [*db, "-n", "spare"]
    run("ingest", str(SAMPLE), *spare)
    out["roll"] = run("roll", "--idle", *spare)
    unit, other = (u["id"] for u in run("units", *spare)["units"][:2])
    shown = run("show", unit, "--messages", *spare)
    message = shown["messages"][-1]["id"]
    out["forget message"] = run("forget", "message", message, *spare)
    slice_id = shown["slices"][0]["id"]
    out["forget slice"] = run("forget", "slice", unit, slice_id[:8], *spare)
    out["forget unit"] = run("forget", "unit", other[:8], *spare)
    out["forget namespace"] = run("forget", "namespace", "--yes", *spare)
    out["purge"] = run("purge", *db)
    made = runner.invoke(
        app, ["keys", "create", "--namespaces", "*", "--scope", "read", *db, "--json"]
    )
    assert made.exit_code == 0, made.output
    out["keys revoke"] = run("keys", "revoke", json.loads(made.output)["key"]["id"], *db)
    return out


def test_every_document_has_the_documented_keys(documents: dict[str, dict[str, Any]]) -> None:
    promised = documented_commands()
    assert set(promised) == set(documents), "every --json command is documented, and only those"
    for command, document in documents.items():
        assert set(document) == promised[command], command


def test_objects_have_the_documented_keys(documents: dict[str, dict[str, Any]]) -> None:
    objects = documented_objects()
    show, stats = documents["show"], documents["stats"]
    objects["window message"] = objects["message"] | objects["window message"]
    found = {
        "message": show["messages"][0],
        "window message": WindowMessage(Message("user", "[USER]:\n\nhi"), 7).to_dict(),
        "slice": show["slices"][0],
        "unit": show["unit"],
        "namespace": documents["namespaces"]["namespaces"][0],
        "rolling totals": stats["rolling_totals"],
        "block": documents["context"]["blocks"][0],
        "consumer": ConsumerStatus("indexer", True, 3, 5, 1, "down", 1_700_000_000_000).to_dict(),
    }
    assert set(found) == set(objects)
    for name, value in found.items():
        assert set(value) == objects[name], name


def test_documents_say_what_is_stored(documents: dict[str, dict[str, Any]]) -> None:
    units, show, slice_ = documents["units"], documents["show"], documents["slice"]
    assert (units["namespace"], units["offset"], units["limit"]) == ("agent", 0, 2)
    assert len(units["units"]) == 2
    assert units["total"] >= 4
    assert len(show["messages"]) == show["unit"]["message_count"]
    assert len(show["slices"]) == show["unit"]["slice_count"]
    first = show["slices"][0]
    assert slice_["slice"] == first
    assert slice_["unit_id"] == show["unit"]["id"]
    assert slice_["messages"] == show["messages"][first["start_index"] : first["end_index"]]
    ingest = documents["ingest"]
    assert [t["skipped_count"] for t in ingest["transcripts"]] == [
        0,
        ingest["transcripts"][1]["message_count"],
    ]
    assert ingest["unit_count"] == documents["stats"]["unit_count"]
    assert documents["reindex"]["message_count"] == sum(
        u["message_count"] for u in documents["copy"]["namespaces"]
    )
    assert documents["forget message"]["message_count"] == 1
    assert len(documents["forget unit"]["unit_id"]) == 36  # the whole id its prefix named
    roll = documents["roll"]
    assert roll["rolled"] == (roll["slice"] is not None) == (roll["unit"] is not None)
    copied = documents["copy"]
    assert [n["namespace"] for n in copied["namespaces"]] == ["agent"]
    assert copied["unit_count"] == copied["namespaces"][0]["unit_count"] == units["total"]


def test_a_timestamp_from_json_is_a_time_flag(
    documents: dict[str, dict[str, Any]], store_url: str
) -> None:
    """Times are epoch ms in JSON, and the time flags take them back as they are."""
    newest = documents["units"]["units"][0]["timestamp"]
    since = run("units", "--db", store_url, "-n", "agent", "--since", str(newest))
    assert [u["timestamp"] for u in since["units"]] == [newest]
    until = run("units", "--db", store_url, "-n", "agent", "--until", str(newest))
    assert until["total"] == documents["units"]["total"] - 1
    bad = runner.invoke(app, ["units", "--db", store_url, "-n", "agent", "--since", "1" + "0" * 30])
    assert bad.exit_code == 4
    assert "--since" in bad.output
    assert "1970" in bad.output
