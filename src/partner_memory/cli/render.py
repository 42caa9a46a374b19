"""Rendering of results: rich tables for people, JSON for programs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from partner_memory.model import (
    ConsumerStatus,
    MemorySlice,
    Message,
    NamespaceInfo,
    RollingTotals,
    UnitInfo,
    WindowMessage,
)
from partner_memory.provenance import SummarySentence

console = Console(highlight=False, soft_wrap=True)


def print_json(document: Any) -> None:
    """Plain JSON on stdout (no colour codes), so it pipes into other tools."""
    print(json.dumps(document, ensure_ascii=False, indent=2))


#: Ids in tables are cut to this many characters; commands accept such prefixes.
SHORT_ID = 8


def short(identifier: str) -> str:
    """An id as tables show it: its first characters, enough to name it (as git does)."""
    return escape(identifier if len(identifier) <= SHORT_ID + 4 else identifier[:SHORT_ID])


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def minute(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M")


def units_table(units: Sequence[UnitInfo], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("unit", no_wrap=True)
    table.add_column("updated (UTC)", no_wrap=True)
    table.add_column("messages", justify="right")
    table.add_column("slices", justify="right")
    for unit in units:
        table.add_row(
            short(unit.id), minute(unit.timestamp), str(unit.message_count), str(unit.slice_count)
        )
    return table


def slices_table(slices: Sequence[MemorySlice]) -> Table:
    table = Table(title="slices", title_justify="left")
    table.add_column("slice", no_wrap=True)
    table.add_column("range", no_wrap=True)
    table.add_column("created (UTC)", no_wrap=True)
    table.add_column("summary", overflow="fold", ratio=1)
    for s in slices:
        table.add_row(
            short(s.id), f"{s.start_index}-{s.end_index}", minute(s.timestamp), escape(s.summary)
        )
    return table


def provenance_table(sentences: Sequence[SummarySentence]) -> Table:
    """The summary sentence by sentence, with the messages each came from and whether
    they support it."""
    table = Table(title="summary, sentence by sentence", title_justify="left")
    table.add_column("sentence", overflow="fold", ratio=1)
    table.add_column("from #", no_wrap=True)
    table.add_column("supported", no_wrap=True)
    for s in sentences:
        held = "yes" if s.supported else f"[bold red]NO[/bold red] ({s.held:.0%} of its words)"
        table.add_row(escape(s.text), ", ".join(map(str, s.positions)) or "-", held)
    return table


def _said(m: Message) -> str:
    """A message's text as recorded, its status markers after it."""
    marks = "".join(f" [{mark}]" for mark in m.markers)
    return escape(m.text) + (f"[dim]{escape(marks)}[/dim]" if marks else "")


def messages_table(messages: Sequence[Message], first_position: int) -> Table:
    table = Table(title="messages", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("speaker")
    table.add_column("text", overflow="fold")
    for offset, m in enumerate(messages):
        table.add_row(str(first_position + offset), m.role, escape(m.speaker or ""), _said(m))
    return table


def window_table(window: Sequence[WindowMessage]) -> Table:
    table = Table(title="window (not rolled yet)", title_justify="left")
    table.add_column("interaction")
    table.add_column("role")
    table.add_column("speaker")
    table.add_column("text", overflow="fold")
    for held in window:
        m = held.message
        table.add_row(when(held.interaction), m.role, escape(m.speaker or ""), _said(m))
    return table


def namespaces_table(namespaces: Sequence[NamespaceInfo]) -> Table:
    table = Table(title="namespaces", title_justify="left")
    table.add_column("namespace")
    table.add_column("memory session", no_wrap=True)
    table.add_column("units", justify="right")
    table.add_column("slices", justify="right")
    for n in namespaces:
        table.add_row(
            escape(n.name), short(n.memory_session_id), f"{n.unit_count:,}", f"{n.slice_count:,}"
        )
    return table


def consumers_table(consumers: Sequence[ConsumerStatus]) -> Table:
    table = Table(title="AfterRolling consumers", title_justify="left")
    table.add_column("consumer", overflow="fold")
    table.add_column("log position", justify="right")
    table.add_column("failures", justify="right")
    table.add_column("last failure", overflow="fold")
    for c in consumers:
        position = f"{c.position} / {c.head}" if c.durable else "in memory"
        last = f"{when(c.last_failure_at)} {c.last_error}" if c.last_error else "-"
        table.add_row(escape(c.name), position, str(c.failures), escape(last))
    return table


_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def warn(text: str) -> None:
    """One warning line on stderr; `text` is printed as written."""
    _stderr.print(f"[yellow]warning:[/] {escape(text)}")


def warn_progress(text: str) -> None:
    """A progress line on stderr, so stdout stays the result."""
    _stderr.print(f"[dim]{escape(text)}[/]")


def warn_fallbacks(totals: RollingTotals, count: int) -> None:
    """Once per run: rollings whose LLM call failed used the offline summary, and why."""
    if count <= 0:
        return
    reason = totals.recent_fallbacks[0] if totals.recent_fallbacks else "unknown"
    _stderr.print(
        f"[yellow]warning:[/] {count} rolling(s) used the offline summary because the LLM"
        f" failed (latest: {escape(reason)}); see `partner-memory stats`"
    )
