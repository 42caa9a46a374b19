"""Copy memory between databases losslessly: SQLite to PostgreSQL and back, or a backup.

Each namespace is read in one transaction and written in one, with every
id, time, summariser, window message, rolling record and consumer position
as it was, so the copy behaves exactly like the original (a re-ingest of
the same transcript skips everything, rolling resumes where it stopped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from partner_memory.errors import ConflictError, NotFoundError
from partner_memory.model import Record
from partner_memory.recall.analyze import default_analysis
from partner_memory.recall.indexer import RECALL_CONSUMER
from partner_memory.store.contract.base import MemoryStore
from partner_memory.store.contract.capabilities import DUMPS, RecallStore, require


@dataclass(frozen=True, slots=True)
class CopiedNamespace(Record):
    json_keys: ClassVar[Mapping[str, str]] = {
        "name": "namespace",
        "units": "unit_count",
        "messages": "message_count",
        "rollings": "rolling_count",
    }

    name: str
    units: int
    messages: int
    rollings: int


@dataclass(slots=True)
class CopyReport(Record):
    json_keys: ClassVar[Mapping[str, str]] = CopiedNamespace.json_keys

    source: str
    destination: str
    namespaces: list[CopiedNamespace] = field(default_factory=list)
    units: int = 0
    messages: int = 0
    rollings: int = 0


def copy_memory(
    source: MemoryStore, destination: MemoryStore, *, namespaces: Sequence[str] = ()
) -> CopyReport:
    """Copy `namespaces` (all when empty) into `destination`, which must not hold them yet."""
    names = list(namespaces) or [n.name for n in source.list_namespaces()]
    missing = [n for n in names if source.get_namespace(n) is None]
    if missing:
        raise NotFoundError(f"namespace {missing[0]!r} not found in {source.url}")
    present = [n for n in names if destination.get_namespace(n) is not None]
    if present:
        raise ConflictError(
            f"namespace {present[0]!r} already exists in {destination.url}; nothing copied"
            " (copy into an empty database, or name other namespaces)"
        )
    report = CopyReport(source=source.url, destination=destination.url)
    exporter, importer = require(source, DUMPS), require(destination, DUMPS)
    for name in names:
        dump = exporter.export_namespace(name)
        importer.import_namespace(dump)
        if isinstance(destination, RecallStore):  # derived data: rebuilt there
            destination.reindex_recall(name, RECALL_CONSUMER, default_analysis())
        copied = CopiedNamespace(name, len(dump.units), len(dump.messages), len(dump.rollings))
        report.namespaces.append(copied)
        report.units += copied.units
        report.messages += copied.messages
        report.rollings += copied.rollings
    return report
