"""Bringing memory in from other systems: `import_memory(store, kind, source)`, and
`partner-memory import --from KIND SOURCE`.

Each reader (`openai_agents`, `langchain_sql`, `letta_file`) reads the whole
source and checks it before anything is written, and gives each namespace a
transcript with stable ids; the transcripts are replayed through rolling as
`ingest` replays them (`ingest_transcripts`), so a second import of the same
source stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from partner_memory.clock import system_clock
from partner_memory.config import Settings
from partner_memory.errors import InvalidInputError
from partner_memory.held_blocks import hold_blocks
from partner_memory.importers import langchain_sql, letta_file, openai_agents
from partner_memory.importers.source import Imported
from partner_memory.ingest import IngestReport, Progress, ingest_transcripts
from partner_memory.items import Items
from partner_memory.store.contract.base import MemoryStore

Reader = Callable[..., list[Imported]]
#: The sources, by the name `--from` takes.
READERS: dict[str, Reader] = {
    openai_agents.KIND: openai_agents.read,
    langchain_sql.KIND: langchain_sql.read,
    letta_file.KIND: letta_file.read,
}
KINDS: tuple[str, ...] = tuple(READERS)

__all__ = [
    "KINDS",
    "ImportReport",
    "Imported",
    "NamespaceImport",
    "import_memory",
    "import_parts",
    "read_source",
]


@dataclass(frozen=True, slots=True)
class NamespaceImport:
    """What one namespace received: its transcripts' reports, the source's items left
    out, and the number of blocks it holds in context from the source."""

    namespace: str
    reports: list[IngestReport]
    skipped: int
    blocks_held: int

    def to_dict(self) -> dict[str, Any]:
        last = self.reports[-1]
        return {
            "namespace": self.namespace,
            "transcripts": [r.to_dict() for r in self.reports],
            "skipped_item_count": self.skipped,
            "held_block_count": self.blocks_held,
            "unit_count": last.units,
            "slice_count": last.slices,
            "rolling_totals": last.totals.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class ImportReport:
    kind: str
    source: str
    namespaces: list[NamespaceImport]

    @property
    def recorded(self) -> int:
        return sum(r.recorded for n in self.namespaces for r in n.reports)

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": self.kind,
            "source": self.source,
            "recorded_count": self.recorded,
            "namespaces": [n.to_dict() for n in self.namespaces],
        }


def read_source(
    kind: str, source: str, *, table: str | None = None, namespace: str | None = None
) -> list[Imported]:
    """The source read and checked whole, nothing written (InvalidInputError naming
    the row, message or field that is wrong)."""
    reader = READERS.get(kind)
    if reader is None:
        raise InvalidInputError(f"unknown source kind {kind!r}; one of {', '.join(KINDS)}")
    return reader(source, table=table, namespace=namespace)


def import_memory(
    store: MemoryStore,
    kind: str,
    source: str,
    *,
    table: str | None = None,
    namespace: str | None = None,
    flush: bool = True,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import `source` (a file, or a database URL for `langchain-sql`) into `store`:
    each session or agent its namespace (`namespace`: all into that one), replayed
    through rolling with the source's own times; blocks held in context."""
    parts = read_source(kind, source, table=table, namespace=namespace)
    return import_parts(
        store, kind, source, parts, flush=flush, settings=settings, progress=progress
    )


def import_parts(
    store: MemoryStore,
    kind: str,
    source: str,
    parts: Sequence[Imported],
    *,
    flush: bool = True,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Replay what `read_source` read into `store` (the second half of `import_memory`)."""
    # a backend without items cannot hold blocks: said before anything is written
    items = Items(store, system_clock) if any(p.blocks for p in parts) else None
    by_namespace: dict[str, list[Imported]] = {}
    for part in parts:
        by_namespace.setdefault(part.namespace, []).append(part)
    done = []
    for name, held in by_namespace.items():
        transcripts = [p.transcript for p in held]
        reports = ingest_transcripts(
            store, name, transcripts, flush=flush, settings=settings, progress=progress
        )
        blocks = [b for p in held for b in p.blocks]
        if blocks and items is not None:  # the same blocks again write nothing
            hold_blocks(items, name, blocks, now=system_clock())
        done.append(NamespaceImport(name, reports, sum(p.skipped for p in held), len(blocks)))
    return ImportReport(kind, source, done)
