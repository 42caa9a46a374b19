"""The package's import graph: layers point one way, and the SQL stays in `store/`.

An import of a name from a package (`from partner_memory.rolling import X`) is
an import of the module that defines it, as the package only re-exports; an
import inside a function counts like any other - a cycle hidden in a lazy
import is still a cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import partner_memory

ROOT = Path(partner_memory.__file__).parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = ("partner_memory", *path.relative_to(ROOT).with_suffix("").parts)
        found[".".join(parts).removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _defining(module: str, name: str, seen: frozenset[str] = frozenset()) -> str:
    """The module that defines `name` as seen from `module` (through re-exports)."""
    if f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    path = MODULES.get(module)
    if path is None or path.name != "__init__.py" or module in seen:
        return module
    for node in ast.parse(path.read_text()).body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and any((a.asname or a.name) == name for a in node.names)
        ):
            return _defining(node.module, name, seen | {module})
    return module


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("partner_memory"):
                    for alias in node.names:
                        graph[module].add(_defining(node.module, alias.name))
            elif isinstance(node, ast.Import):
                graph[module].update(a.name for a in node.names if a.name in MODULES)
        graph[module].discard(module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_only_the_store_imports_its_sql_modules() -> None:
    outside = {
        f"{module} -> {target}"
        for module, targets in _graph().items()
        if not module.startswith("partner_memory.store")
        for target in targets
        if target.startswith("partner_memory.store.sql.verbs")
        or target.startswith("partner_memory.store.postgres")
        or target.startswith("partner_memory.store.pg_")
    }
    assert outside == set()


def test_only_telemetry_sdk_imports_the_opentelemetry_sdk() -> None:
    """The library speaks the OpenTelemetry API; the SDK and exporters are `serve`'s."""
    sdk_like = ("opentelemetry.sdk", "opentelemetry.exporter", "prometheus_client")
    importers = set()
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any(name.startswith(sdk_like) for name in names):
                importers.add(module)
    assert importers == {"partner_memory.telemetry.sdk"}


#: A module past this many lines holds more than one job (split it by job).
MODULE_LINES = 600


def test_no_module_is_over_its_size() -> None:
    over = {
        module: lines
        for module, path in MODULES.items()
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert over == {}


def test_ranking_is_pure() -> None:
    """Ranking is tested on pools made by hand: it never imports the search engine."""
    graph = _graph()
    assert not any(t.startswith("tantivy") for t in _imported("partner_memory.recall.ranking"))
    assert "partner_memory.recall.tantivy_index" not in graph["partner_memory.recall.ranking"]


def _imported(module: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_no_folder_level_cycle() -> None:
    """Folders point one way too: `telemetry` does not read the store (the gauges that do
    are `store_gauges`), and the inspector applies the key rule of `access`, not HTTP's."""
    graph = _graph()
    folders: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = ".".join(module.split(".")[:2])
        folders.setdefault(here, set())
        for target in targets:
            there = ".".join(target.split(".")[:2])
            folders.setdefault(there, set())
            if there != here:
                folders[here].add(there)
    assert _cycles(folders) == []


def test_no_adapter_reaches_the_store() -> None:
    """Adapters use service verbs (`service.items`, `core.known_ids`), so a new adapter
    never grows the backend contract."""
    graph = _graph()
    reached = set()
    for module, path in MODULES.items():
        if not module.startswith("partner_memory.integrations"):
            continue
        reached |= {
            f"{module} -> {t}" for t in graph[module] if t.startswith("partner_memory.store")
        }
        reached |= {
            f"{module}:{node.lineno} .store"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr == "store"
        }
    assert reached == set()


#: The five-minute map's length, in words.
MAP_WORDS = 1500


def test_the_architecture_map_is_short_and_names_what_exists() -> None:
    text = (ROOT.parent.parent / "ARCHITECTURE.md").read_text()
    assert len(text.split()) <= MAP_WORDS
    named = set(re.findall(r"\b([a-z_]+(?:/[a-z_]+)*\.py)\b", text))
    assert named
    everywhere = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")}
    tests = {f"tests/{p.name}" for p in (ROOT.parent.parent / "tests").glob("*.py")}
    tests |= {f"benchmarks/{p.name}" for p in (ROOT.parent.parent / "benchmarks").glob("*.py")}
    missing = {
        name
        for name in named
        if name not in tests
        and not any(path == name or path.endswith("/" + name) for path in everywhere)
    }
    assert missing == set()
