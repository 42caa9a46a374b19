"""A bad-input matrix for the command line, on every backend.

Each case must exit with the README's code for its error, print one line on
stderr that names what is wrong, and leave every stored row as it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from partner_memory.cli import app
from partner_memory.store import open_store

ROOT = Path(__file__).parent.parent
EXAMPLE = ROOT / "examples" / "partner-state"
SAMPLE = ROOT / "examples" / "conversation.jsonl"
FIRST_UNIT = "3f2b8c1e-7a4d-4e0b-9c51-0d2a6b7e8f10"
runner = CliRunner()


def _line(**fields: Any) -> str:
    return json.dumps({"role": "user", "content": "hi", **fields})


#: File name -> content (bytes or text) the cases refer to as {name}.
FILES: dict[str, bytes | str] = {
    "latin1.jsonl": _line().encode()
    + b"\n"
    + '{"role": "user", "content": "caf\xe9"}'.encode("latin-1"),
    "nan.jsonl": _line() + "\n" + '{"role": "user", "content": "x", "timestamp": NaN}\n',
    "huge-time.jsonl": _line(timestamp=10**30) + "\n",
    "robot.jsonl": _line(role="robot") + "\n",
    "no-content.jsonl": '{"role": "user"}\n',
    "twice.jsonl": _line(id="same") + "\n" + _line(id="same", content="other") + "\n",
    "deep.jsonl": "[" * 100_000 + "]" * 100_000 + "\n",
    "not-object.jsonl": "[1, 2]\n",
    "locomo-list.json": json.dumps({"conversation": []}),
    "locomo-date.json": json.dumps(
        {
            "conversation": {
                "speaker_a": "A",
                "speaker_b": "B",
                "session_1": [{"speaker": "A", "text": "hi", "dia_id": "D1:1"}],
                "session_1_date_time": 20240101,
            }
        }
    ),
    "empty-state/.keep": "",
    "a-file": "not a directory",
}

#: (case id, arguments, exit code, words the one error line must contain, environment)
CASES: list[tuple[str, list[str], int, str, dict[str, str]]] = [
    ("ingest non-UTF-8", ["ingest", "{latin1.jsonl}"], 4, "latin1.jsonl", {}),
    ("ingest NaN time", ["ingest", "{nan.jsonl}"], 4, "nan.jsonl line 2", {}),
    ("ingest huge time", ["ingest", "{huge-time.jsonl}"], 4, "huge-time.jsonl line 1", {}),
    ("ingest unknown role", ["ingest", "{robot.jsonl}"], 4, "role", {}),
    ("ingest no content", ["ingest", "{no-content.jsonl}"], 4, "no-content.jsonl line 1", {}),
    ("ingest id twice", ["ingest", "{twice.jsonl}"], 4, "twice.jsonl line 2", {}),
    ("ingest deep JSON", ["ingest", "{deep.jsonl}"], 4, "deep.jsonl line 1", {}),
    ("ingest not an object", ["ingest", "{not-object.jsonl}"], 4, "not-object.jsonl line 1", {}),
    (
        "ingest LoCoMo list",
        ["ingest", "{locomo-list.json}", "--format", "locomo"],
        4,
        "locomo-list.json",
        {},
    ),
    ("ingest LoCoMo date", ["ingest", "{locomo-date.json}"], 4, "locomo-date.json", {}),
    (
        "ingest missing file",
        ["ingest", "{tmp}/nowhere.jsonl"],
        4,
        "nowhere.jsonl does not exist",
        {},
    ),
    ("ingest a directory", ["ingest", "{tmp}"], 4, "is not a file", {}),
    ("ingest bad format", ["ingest", "{robot.jsonl}", "--format", "xml"], 2, "--format", {}),
    (
        "ingest good then bad",  # every file is checked before the first is recorded
        ["ingest", str(SAMPLE), "{robot.jsonl}"],
        4,
        "robot.jsonl line 1",
        {},
    ),
    (
        "ingest zero max messages",
        ["ingest", str(SAMPLE)],
        6,
        "PARTNER_MEMORY_ROLLING_MAX_MESSAGES",
        {"PARTNER_MEMORY_ROLLING_MAX_MESSAGES": "0"},
    ),
    (
        "ingest negative retries",
        ["ingest", str(SAMPLE)],
        6,
        "PARTNER_MEMORY_LLM_MAX_RETRIES",
        {
            "PARTNER_MEMORY_LLM_MAX_RETRIES": "-1",
            "PARTNER_MEMORY_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "PARTNER_MEMORY_LLM_MODEL": "m",
        },
    ),
    ("empty namespace", ["units", "-n", ""], 4, "namespace", {}),
    ("namespace too long", ["units", "-n", "x" * 300], 4, "namespace", {}),
    ("unknown namespace", ["units", "-n", "ghost"], 3, "namespace 'ghost' not found", {}),
    ("stats unknown namespace", ["stats", "-n", "ghost"], 3, "'ghost'", {}),
    ("refresh unknown namespace", ["session", "--refresh", "-n", "ghost"], 3, "'ghost'", {}),
    ("limit zero", ["units", "--limit", "0"], 4, "limit", {}),
    ("since far future", ["units", "--since", "1" + "0" * 30], 4, "--since", {}),
    ("since not a date", ["units", "--since", "soon"], 4, "--since 'soon'", {}),
    ("unknown unit", ["show", "nope"], 3, "unit 'nope' not found", {}),
    ("unknown slice", ["slice", FIRST_UNIT, "nope"], 3, "slice 'nope'", {}),
    ("markup in an id", ["show", "x[/]"], 3, "x[/]", {}),
    ("unknown domain", ["context", "--domain", "dreams"], 2, "--domain", {}),
    ("import empty directory", ["import-partner", "{empty-state}"], 4, "empty-state", {}),
    ("import missing directory", ["import-partner", "{tmp}/nowhere"], 4, "nowhere", {}),
    ("export onto a file", ["export-partner", "{a-file}"], 4, "a-file", {}),
    ("copy onto itself", ["copy", "{db}", "{db}"], 5, "already exists", {}),
    ("copy unknown namespace", ["copy", "{db}", "{tmp}/c.db", "-n", "ghost"], 3, "'ghost'", {}),
    ("chat without LLM", ["chat"], 6, "PARTNER_MEMORY_LLM_BASE_URL", {}),
    ("unsupported URL", ["units", "--db", "mysql://x/y"], 6, "mysql", {}),
]


def _everything(url: str) -> list[Any]:
    store = open_store(url, read_only=True)
    try:
        return [store.export_namespace(n.name) for n in store.list_namespaces()]
    finally:
        store.close()


@pytest.fixture
def db(store_url: str) -> str:
    for args in (["import-partner", str(EXAMPLE)], ["ingest", str(SAMPLE)]):
        done = runner.invoke(app, [*args, "--db", store_url, "-n", "agent"])
        assert done.exit_code == 0, done.output
    return store_url


@pytest.mark.parametrize(
    ("args", "code", "says", "env"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_bad_input_is_one_line_a_code_and_no_change(
    db: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    code: int,
    says: str,
    env: dict[str, str],
) -> None:
    for name, content in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, "utf-8")
    (tmp_path / "empty-state" / ".keep").unlink()
    for name in ("PARTNER_MEMORY_LLM_BASE_URL", "PARTNER_MEMORY_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    places = {"{db}": db, "{tmp}": str(tmp_path)} | {
        "{" + name.split("/")[0] + "}": str(tmp_path / name.split("/")[0]) for name in FILES
    }
    argv = []
    for arg in args:
        for place, value in places.items():
            arg = arg.replace(place, value)  # noqa: PLW2901
        argv.append(arg)
    if argv[0] != "copy":
        argv += [] if "--db" in argv else ["--db", db]
        argv += [] if "-n" in argv else ["-n", "agent"]
    before = _everything(db)
    result = runner.invoke(app, argv, input="")
    assert result.exit_code == code, (result.exit_code, result.output)
    out = result.output
    assert says in " ".join(out.split()), out
    if code != 2:  # the CLI library's own usage errors are a short block
        assert len(out.strip().splitlines()) == 1, out
        assert out.startswith("error: "), out
        assert "Traceback" not in out
    assert _everything(db) == before
