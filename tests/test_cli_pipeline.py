"""The pipeline commands: ingest, context, stats and chat, through typer's test runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from partner_memory.cli import app

ROOT = Path(__file__).parent.parent
SAMPLE = ROOT / "examples" / "conversation.jsonl"
runner = CliRunner()


def run(*args: str, code: int = 0, stdin: str | None = None) -> str:
    result = runner.invoke(app, list(args), input=stdin)
    assert result.exit_code == code, (result.exit_code, result.output)
    return result.output


def test_ingest_sample_then_inspect(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    report = json.loads(run("ingest", str(SAMPLE), "--db", db, "--json"))
    (first,) = report["transcripts"]
    assert first["recorded_count"] == first["message_count"] > 0
    assert report["unit_count"] == 2  # two conversations, days apart
    totals = report["rolling_totals"]
    assert totals["by_summarizer"] == {"extractive": totals["rolling_count"]}
    again = json.loads(run("ingest", str(SAMPLE), "--db", db, "--json"))
    (second,) = again["transcripts"]
    assert (second["recorded_count"], second["skipped_count"]) == (0, first["message_count"])
    table = run("ingest", str(SAMPLE), "--db", db)
    assert "messages/s" in table
    assert json.loads(run("units", "--db", db, "--json"))["total"] == 2
    stats = json.loads(run("stats", "--db", db, "--json"))
    assert stats["rolling_totals"]["message_count"] == first["message_count"]
    assert "summaries by extractive" in run("stats", "--db", db)


def test_context_prints_dialog_history(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    run("ingest", str(SAMPLE), "--db", db)
    xml = run("context", "--db", db)
    assert xml.startswith('<dialog_history source="dialog_rolling" urgency="NORMAL">')
    blocks = json.loads(run("context", "--db", db, "--domain", "memory", "--json"))["blocks"]
    assert blocks[0]["exposure"] == "PRIMARY"
    assert run("context", "--db", db, "--domain", "action") == "\n"
    assert "domains are" in run("context", "--db", db, "--domain", "smell", code=2)


def test_bad_inputs(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    assert "does not exist" in run("ingest", str(tmp_path / "none.jsonl"), "--db", db, code=4)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "ok"}\nnot json\n')
    assert "bad.jsonl line 2" in run("ingest", str(bad), "--db", db, code=4)
    assert "--format" in run("ingest", str(bad), "--db", db, "--format", "csv", code=2)
    assert not Path(db).exists()  # transcripts are checked before anything is written
    run("ingest", str(SAMPLE), "--db", db, "-n", "real")
    assert "not found" in run("stats", "--db", db, "-n", "ghost", code=3)


def test_chat_without_llm_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARTNER_MEMORY_LLM_BASE_URL", raising=False)
    out = run("chat", "--db", str(tmp_path / "m.db"), code=6, stdin="hello\n")
    assert "PARTNER_MEMORY_LLM_BASE_URL" in out


def test_chat_remembers_turns(
    fake_llm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "m.db")
    run("ingest", str(SAMPLE), "--db", db)  # offline summaries
    monkeypatch.setenv("PARTNER_MEMORY_LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("PARTNER_MEMORY_LLM_MODEL", "m")
    monkeypatch.setenv("PARTNER_MEMORY_LLM_TOPICS", "off")  # no filing calls between turns
    fake_llm.script.extend([("ok", "Hello Mei!"), ("ok", "NO_REPLY\nlet her think")])
    out = run("chat", "--db", db, "--source", "USER: Mei", stdin="hi\nhmm\n")
    assert out.strip().splitlines() == ["Hello Mei!"]
    first = fake_llm.requests[0]["body"]["messages"]
    assert "<dialog_history" in first[0]["content"]
    assert first[-1] == {"role": "user", "content": "[USER: Mei]:\n\nhi"}
    second = fake_llm.requests[1]["body"]["messages"]
    assert second[-2]["content"] == "[[AGENT]: self]:\n\nHello Mei!"
    window = json.loads(run("export-partner", str(tmp_path / "out"), "--db", db, "--json"))
    assert window["unit_count"] == 2
    cognition = json.loads((tmp_path / "out" / "core" / "cognition.json").read_text())
    assert (
        cognition["chat_messages"][-1]["content"]
        == "[[AGENT]: self]: [NOT_REPLIED]:\n\nlet her think"
    )


def test_ingest_without_flush_keeps_the_window(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    report = json.loads(run("ingest", str(SAMPLE), "--db", db, "--no-flush", "--json"))
    assert report["unit_count"] == 1  # the first conversation was rolled when the second began
    run("export-partner", str(tmp_path / "out"), "--db", db)
    cognition = json.loads((tmp_path / "out" / "core" / "cognition.json").read_text())
    assert [m["content"][:8] for m in cognition["chat_messages"]][:1] == ["[USER: 小"]
    assert len(cognition["chat_messages"]) == 6


def test_llm_fallbacks_are_not_silent(
    tmp_path: Path, fake_llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unusable LLM: ingest warns once with the reason, stats counts and shows it."""
    fake_llm.default = ("status", 500)
    monkeypatch.setenv("PARTNER_MEMORY_LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("PARTNER_MEMORY_LLM_MODEL", "m")
    monkeypatch.setenv("PARTNER_MEMORY_LLM_MAX_RETRIES", "0")
    db = str(tmp_path / "m.db")
    out = run("ingest", str(SAMPLE), "--db", db)
    assert out.count("warning:") == 1
    assert "2 rolling(s) used the offline summary" in " ".join(out.split())
    assert "InternalServerError" in out
    stats = json.loads(run("stats", "--db", db, "--json"))
    totals = stats["rolling_totals"]
    assert totals["fallback_count"] == 2
    assert len(totals["recent_fallback_reasons"]) == 2
    assert "InternalServerError" in totals["recent_fallback_reasons"][0]
    assert "rollings with an LLM fallback" in run("stats", "--db", db)
    again = run("ingest", str(SAMPLE), "--db", db)  # nothing new rolled: nothing to warn about
    assert "warning:" not in again


def test_rolling_numbers_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "m.db")
    default = json.loads(run("ingest", str(SAMPLE), "--db", db, "-n", "a", "--json"))
    monkeypatch.setenv("PARTNER_MEMORY_ROLLING_MAX_MESSAGES", "4")
    small = json.loads(run("ingest", str(SAMPLE), "--db", db, "-n", "b", "--json"))
    assert small["rolling_totals"]["rolling_count"] > default["rolling_totals"]["rolling_count"]
    monkeypatch.setenv("PARTNER_MEMORY_ROLLING_MAX_MESSAGES", "0")
    out = run("ingest", str(SAMPLE), "--db", db, "-n", "c", code=6)
    assert "max_messages" in out


def test_chat_keeps_the_line_when_the_llm_fails(
    fake_llm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "m.db")
    monkeypatch.setenv("PARTNER_MEMORY_LLM_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("PARTNER_MEMORY_LLM_MODEL", "m")
    monkeypatch.setenv("PARTNER_MEMORY_LLM_MAX_RETRIES", "0")
    fake_llm.script.extend([("status", 500), ("ok", "Back again.")])
    out = run("chat", "--db", db, stdin="are you there?\nhello\n")
    assert "your message was kept" in out
    assert "Back again." in out
    window = json.loads(run("export-partner", str(tmp_path / "out"), "--db", db, "--json"))
    assert window["message_count"] == 0  # nothing rolled yet: all four messages are in the window
    cognition = json.loads((tmp_path / "out" / "core" / "cognition.json").read_text())
    contents = [m["content"] for m in cognition["chat_messages"]]
    assert contents[0] == "[USER]:\n\nare you there?"
    assert contents[1].startswith("[[AGENT]: self]: [NOT_REPLIED]")


def test_ingest_reads_several_files_and_stdin(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    later = tmp_path / "later.jsonl"
    later.write_text(
        '{"role": "user", "content": "back from Kyoto", "timestamp": "2024-06-01T10:00:00"}\n'
        '{"role": "assistant", "content": "How was it?", "timestamp": "2024-06-01T10:00:05"}\n'
    )
    both = json.loads(run("ingest", str(SAMPLE), str(later), "--db", db, "--json"))
    assert [r["transcript"] for r in both["transcripts"]] == ["conversation.jsonl", "later.jsonl"]
    assert both["unit_count"] == 3  # a third conversation, weeks later
    piped = json.loads(
        run("ingest", "-", "--db", db, "-n", "piped", "--json", stdin=later.read_text())
    )
    assert [(t["transcript"], t["recorded_count"]) for t in piped["transcripts"]] == [("stdin", 2)]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not json\n")
    out = run("ingest", str(later), str(broken), "--db", db, "-n", "fresh", code=4)
    assert "broken.jsonl line 1" in out
    assert "not found" in run("units", "--db", db, "-n", "fresh", code=3)  # nothing recorded
