"""The CLI through typer's test runner: output, --json, exit codes, help and README coverage."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from partner_memory.cli import app
from partner_memory.cli.errors import EXIT_CODES
from partner_memory.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    StorageUnavailableError,
)

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "partner-state"
FIRST_UNIT = "3f2b8c1e-7a4d-4e0b-9c51-0d2a6b7e8f10"
FIRST_SLICE = "a1c3e5f7-0000-4000-8000-000000000002"
runner = CliRunner()


def run(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.exit_code, result.output)
    return result.output


@pytest.fixture
def db(store_url: str) -> str:
    run("import-partner", str(EXAMPLE), "--db", store_url, "--namespace", "agent")
    return store_url


def test_units_table_and_json(db: str) -> None:
    table = run("units", "--db", db, "-n", "agent")
    assert FIRST_UNIT[:8] in table  # tables show short ids; commands take them
    assert FIRST_UNIT not in table
    page = json.loads(run("units", "--db", db, "-n", "agent", "--json", "--limit", "2"))
    assert page["total"] == 3
    assert [u["message_count"] for u in page["units"]] == [3, 6]


def test_units_time_range(db: str) -> None:
    page = json.loads(
        run(
            "units",
            "--db",
            db,
            "-n",
            "agent",
            "--json",
            "--since",
            "2024-05-06",
            "--until",
            "2024-05-07",
        )
    )
    assert [u["id"] for u in page["units"]] == ["9d4e2a71-5b3c-4f8e-a612-3c7d9e0f1a22"]
    out = run("units", "--db", db, "-n", "agent", "--since", "yesterday", code=4)
    assert "--since" in out


def test_show_with_messages(db: str) -> None:
    document = json.loads(
        run("show", FIRST_UNIT, "--db", db, "-n", "agent", "--messages", "--json")
    )
    assert document["unit"]["id"] == FIRST_UNIT
    assert len(document["messages"]) == 4
    assert [s["end_index"] for s in document["slices"]] == [2, 4]
    assert "200,000 yen" in run("show", FIRST_UNIT, "--db", db, "-n", "agent", "--messages")


def test_slice_prints_summary_and_its_messages(db: str) -> None:
    document = json.loads(
        run("slice", FIRST_UNIT, FIRST_SLICE, "--db", db, "-n", "agent", "--json")
    )
    assert document["slice"]["summary"].startswith("Mei's budget")
    assert [m["content"].split("\n\n")[1][:12] for m in document["messages"]] == [
        "Also my budg",
        "Got it: roug",
    ]
    assert "budget" in run("slice", FIRST_UNIT, FIRST_SLICE, "--db", db, "-n", "agent")
    traced = document["provenance"]
    assert traced
    assert all(set(s) == {"text", "positions", "supported", "held"} for s in traced)
    shown = run("slice", FIRST_UNIT, FIRST_SLICE, "--db", db, "-n", "agent")
    assert "summary, sentence by sentence" in shown
    assert traced[0]["text"][:20] in shown.replace("\n", " ")


def test_session_and_refresh(db: str) -> None:
    current = json.loads(run("session", "--db", db, "-n", "agent", "--json"))
    assert current["memory_session_id"] == "c7a1f0d2-8e6b-4c3a-b9d5-6e2f4a8c0b33"
    fresh = run("session", "--db", db, "-n", "agent", "--refresh").strip()
    assert fresh != current["memory_session_id"]
    assert run("session", "--db", db, "-n", "agent").strip() == fresh


def test_namespaces(db: str) -> None:
    listed = json.loads(run("namespaces", "--db", db, "--json"))
    assert listed["namespaces"][0]["namespace"] == "agent"
    assert listed["namespaces"][0]["unit_count"] == 3
    assert "agent" in run("namespaces", "--db", db)


def test_export_then_import_elsewhere(db: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = json.loads(run("export-partner", str(out), "--db", db, "-n", "agent", "--json"))
    assert report["unit_count"] == 3
    second = tmp_path / "second.db"
    imported = json.loads(run("import-partner", str(out), "--db", str(second), "--json"))
    assert imported["created_unit_count"] == 3


def test_import_twice_reports_no_change(db: str) -> None:
    again = json.loads(run("import-partner", str(EXAMPLE), "--db", db, "-n", "agent", "--json"))
    assert again["unchanged_unit_count"] == 3
    assert again["added_message_count"] == 0


def test_not_found_exit_code(db: str) -> None:
    assert "unit 'nope' not found" in run("show", "nope", "--db", db, "-n", "agent", code=3)
    assert "slice 'nope' not found" in run(
        "slice", FIRST_UNIT, "nope", "--db", db, "-n", "agent", code=3
    )
    assert "namespace 'ghost' not found" in run("units", "--db", db, "-n", "ghost", code=3)


def test_bad_paging_exit_code(db: str) -> None:
    assert "offset" in run("units", "--db", db, "-n", "agent", "--offset", "-1", code=4)


def test_missing_database_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    assert "does not exist" in run("units", "--db", str(missing), code=6)
    assert not missing.exists()


def test_bad_url_scheme(tmp_path: Path) -> None:
    assert "unsupported database URL scheme 'mysql'" in run("units", "--db", "mysql://x/y", code=6)


def test_unreachable_postgres() -> None:
    out = run("namespaces", "--db", "postgresql://postgres@127.0.0.1:1/test", code=7)
    assert "cannot connect to PostgreSQL" in out


def test_locked_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    db = str(tmp_path / "locked.db")
    run("import-partner", str(EXAMPLE), "--db", db, "-n", "agent")
    monkeypatch.setenv("PARTNER_MEMORY_BUSY_TIMEOUT", "0.2")
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        out = run("session", "--refresh", "--db", db, "-n", "agent", code=7)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert "locked" in out
    assert json.loads(run("session", "--db", db, "-n", "agent", "--json"))["memory_session_id"] == (
        "c7a1f0d2-8e6b-4c3a-b9d5-6e2f4a8c0b33"
    )


def test_bad_busy_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTNER_MEMORY_BUSY_TIMEOUT", "soon")
    assert "PARTNER_MEMORY_BUSY_TIMEOUT" in run("units", "--db", str(tmp_path / "x.db"), code=6)


def test_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    assert "junk.db" in run("units", "--db", str(junk), code=7)
    assert junk.read_bytes() == b"this is not sqlite" * 100


def test_bad_state_dir_leaves_store_unchanged(db: str, tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "memory.json").write_text('{"memory_session_id": "s"}')
    out = run("import-partner", str(tmp_path), "--db", db, "-n", "agent", code=4)
    assert "memory_unit_uuid_set" in out
    assert json.loads(run("session", "--db", db, "-n", "agent", "--json"))["memory_session_id"] == (
        "c7a1f0d2-8e6b-4c3a-b9d5-6e2f4a8c0b33"
    )


def test_env_selects_database(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTNER_MEMORY_DB", db)
    monkeypatch.setenv("PARTNER_MEMORY_NAMESPACE", "agent")
    assert json.loads(run("units", "--json"))["total"] == 3


def test_exit_codes_are_distinct_and_documented() -> None:
    from partner_memory.errors import LLMError

    kinds = [
        NotFoundError,
        InvalidInputError,
        ConflictError,
        ConfigurationError,
        StorageUnavailableError,
        LLMError,
    ]
    assert sorted(EXIT_CODES[k] for k in kinds) == [3, 4, 5, 6, 7, 8]
    readme = " ".join((ROOT / "README.md").read_text("utf-8").split())
    for code, words in ((3, "not found"), (7, "storage unavailable"), (8, "LLM failure")):
        assert f"{code} {words}" in readme


def test_error_text_is_printed_as_written(db: str) -> None:
    """An id or message with markup-like brackets is printed literally, not interpreted."""
    result = runner.invoke(app, ["show", "x[/]", "--db", db, "-n", "agent"])
    assert result.exit_code == 3
    assert "'x[/]' not found" in result.output


def test_llm_settings_never_show_the_key() -> None:
    from partner_memory.rolling import LLMSettings

    settings = LLMSettings(base_url="http://127.0.0.1:1/v1", model="m", api_key="sk-secret-42")
    assert "sk-secret-42" not in repr(settings)
    assert "sk-secret-42" not in str(settings)


def test_every_command_has_help_and_is_in_readme() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    names = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback}
    assert names >= {
        "units",
        "show",
        "slice",
        "session",
        "namespaces",
        "import-partner",
        "export-partner",
    }
    for name in names:
        out = run(name, "--help")
        assert "--db" in out or name == "copy"  # copy names two databases as arguments
        assert re.search(rf"partner-memory {re.escape(name)}\b", readme), (
            f"{name} missing from README"
        )


def test_conventions_version_short_help_and_format_choice() -> None:
    from importlib.metadata import version

    assert run("--version").strip() == f"partner-memory {version('partner-memory')}"
    assert "Usage: partner-memory" in run("-h")
    assert "Usage: partner-memory units" in run("units", "-h")
    out = " ".join(run("ingest", "missing.jsonl", "--format", "yaml", code=2).split())
    assert "'yaml' is not one of 'auto'," in out


def test_ids_may_be_shortened_as_git_allows(db: str) -> None:
    """Unambiguous prefixes name units and slices; an ambiguous one is an error listing both."""
    shown = json.loads(run("show", FIRST_UNIT[:8], "--db", db, "-n", "agent", "--json"))
    assert shown["unit"]["id"] == FIRST_UNIT
    one = json.loads(run("slice", FIRST_UNIT[:6], FIRST_SLICE, "--db", db, "-n", "agent", "--json"))
    assert (one["unit_id"], one["slice"]["id"]) == (FIRST_UNIT, FIRST_SLICE)
    both = run("slice", FIRST_UNIT[:6], FIRST_SLICE[:9], "--db", db, "-n", "agent", code=4)
    assert "is ambiguous" in both
    out = run("show", "", "--db", db, "-n", "agent", code=3)
    assert "not found" in out
    run("show", "zzzz", "--db", db, "-n", "agent", code=3)


def test_ambiguous_prefix_is_invalid_input(tmp_path: Path) -> None:
    from partner_memory.core import MemoryCore
    from partner_memory.errors import InvalidInputError
    from partner_memory.model import Message
    from partner_memory.store import open_store

    store = open_store(tmp_path / "m.db")
    core = MemoryCore(store, "ns")
    for unit in ("abc-1", "abc-2"):
        store.set_session("ns", unit)
        core.update_memory_unit([Message(role="user", content=unit)], "s")
    with pytest.raises(InvalidInputError, match="ambiguous: it begins abc-1, abc-2"):
        core.resolve_unit_id("abc")
    assert core.resolve_unit_id("abc-2") == "abc-2"
    store.close()


def test_tables_are_readable_at_80_columns(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Short ids leave the summary most of the width: no line is wider than the terminal."""
    from partner_memory.cli import render

    monkeypatch.setattr(render.console, "_width", 80)
    shown = run("show", FIRST_UNIT, "--db", db, "-n", "agent")
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= 80
    summary_cells = [line for line in lines if "│" in line and "summary" not in line]
    assert len(summary_cells) < 20  # a summary of a few hundred characters, not 40+ lines


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--offset", "1e20"], 2, "--offset"),
        (["--offset", "100000000000000000000"], 4, "offset must be between 0 and"),
        (["--offset", "-1"], 4, "offset must be between 0 and"),
        (["--limit", "0"], 4, "limit must be between 1 and 1000"),
        (["--since", "yesterday"], 4, "--since 'yesterday' is neither an ISO date"),
    ],
)
def test_bad_paging_is_one_line_and_a_code(db: str, args: list[str], code: int, says: str) -> None:
    before = run("units", "--db", db, "-n", "agent", "--json")
    out = run("units", "--db", db, "-n", "agent", *args, code=code)
    assert says in " ".join(out.split())
    if code != 2:
        assert len(out.strip().splitlines()) == 1
    assert run("units", "--db", db, "-n", "agent", "--json") == before


def test_db_and_namespace_may_come_before_the_command(db: str) -> None:
    import subprocess
    import sys

    from partner_memory.cli.app import hoisted

    assert hoisted(["--db", "x.db", "-n", "a", "units", "--json"]) == [
        "units",
        "--db",
        "x.db",
        "-n",
        "a",
        "--json",
    ]
    assert hoisted(["--db=x.db", "show", "u1"]) == ["show", "--db=x.db", "u1"]
    assert hoisted(["units", "--db", "x.db"]) == ["units", "--db", "x.db"]
    assert hoisted(["--version"]) == ["--version"]
    done = subprocess.run(
        [sys.executable, "-m", "partner_memory", "--db", db, "-n", "agent", "units", "--json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total"] == 3


def test_namespaces_page_by_name(store_url: str) -> None:
    """Thousands of namespaces are listed a page at a time, by name, with a key to go on."""
    for name in ("c", "a", "b"):
        run("import-partner", str(EXAMPLE), "--db", store_url, "-n", name)
    first = json.loads(run("namespaces", "--db", store_url, "--limit", "2", "--json"))
    assert [n["namespace"] for n in first["namespaces"]] == ["a", "b"]
    assert (first["total"], first["next_after"]) == (3, "b")
    assert first["namespaces"][0]["slice_count"] > 0
    rest = json.loads(run("namespaces", "--db", store_url, "--after", "b", "--json"))
    assert ([n["namespace"] for n in rest["namespaces"]], rest["next_after"]) == (["c"], None)
    table = run("namespaces", "--db", store_url, "--limit", "1")
    assert "--after 'a'" in table
    assert "limit must be between 1 and 1000" in run(
        "namespaces", "--db", store_url, "--limit", "0", code=4
    )


def test_units_page_after_a_unit(db: str) -> None:
    first = json.loads(run("units", "--db", db, "-n", "agent", "--limit", "2", "--json"))
    assert first["next_after"] == first["units"][-1]["id"]
    rest = json.loads(
        run("units", "--db", db, "-n", "agent", "--after", first["next_after"][:8], "--json")
    )
    everything = json.loads(run("units", "--db", db, "-n", "agent", "--json"))
    assert [u["id"] for u in first["units"] + rest["units"]] == [
        u["id"] for u in everything["units"]
    ]
    assert rest["next_after"] is None
    out = run("units", "--db", db, "-n", "agent", "--after", "zzz", "--offset", "1", code=3)
    assert "'zzz'" in out
