"""The README's HTTP example, run as a newcomer runs it: its `keys create` and its
`serve` name the same database, so the key it prints opens the service and nothing
else does; a service started with no key says that it is open."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from partner_memory.cli import app
from tests.http_server import ROOT, Server


def _example() -> list[list[str]]:
    """The partner-memory commands of the README's first HTTP shell block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## HTTP service") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    commands = []
    for line in block.group(1).splitlines():
        if line.startswith("partner-memory "):
            commands.append(shlex.split(line.split("#")[0].rstrip(" &"))[1:])
    return commands


def _option(words: list[str], name: str) -> str | None:
    return words[words.index(name) + 1] if name in words else None


def test_the_readme_http_example_serves_what_its_key_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create, serve = _example()
    assert create[:2] == ["keys", "create"]
    assert serve[0] == "serve"
    monkeypatch.chdir(tmp_path)  # relative names resolve where the newcomer stands
    made = CliRunner().invoke(app, create)
    assert made.exit_code == 0, made.output
    token = made.output.split()[0]
    assert token.startswith("pm_")
    served = tmp_path / (_option(serve, "--db") or "partner-memory.db")
    assert served.exists(), "the key was made in another database than the one served"
    server = Server(str(served), cwd=tmp_path)
    try:
        turn = {"user_input": "hi", "assistant_output": "hello"}
        url = f"{server.url}/v1/namespaces/agent-42%2Fmain/turns"
        assert httpx.post(url, json=turn, timeout=30).status_code == 401
        keyed = httpx.post(url, json=turn, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert keyed.status_code == 201
    finally:
        output = server.stop()
    assert "no API key" not in output


def test_serve_without_a_key_says_the_service_is_open(tmp_path: Path) -> None:
    server = Server(str(tmp_path / "open.db"))
    output = server.stop()
    assert "has no API key, so any local process can read, write and forget" in output


def test_the_readme_installs_what_a_clone_can_install() -> None:
    """The package is not published: every install line works from a clone (`pip install
    -e '.[extra]'`) and names an extra pyproject.toml defines; the published form appears
    only where the README says it is for after a release."""
    import tomllib

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    lines = [line for line in readme.splitlines() if "pip install" in line]
    assert lines
    for line in lines:
        if re.search(r"pip install '?partner-memory", line):
            at = readme.index(line)
            assert "published" in readme[max(0, at - 300) : at + len(line)], line
        for named in re.findall(r"pip install -e '?\.\[([a-z-]+)\]", line):
            assert named in extras, line
