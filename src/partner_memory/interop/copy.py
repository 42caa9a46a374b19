"""Copy memory between databases losslessly: SQLite to PostgreSQL and back, or a backup.

Each namespace is read in one transaction and written in one, with every
id, time, summariser, window message, rolling record and consumer position
as it was, so the copy behaves exactly like the original (a re-ingest of
the same transcript skips everything, rolling resumes where it stopped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from partner_memory.errors import ConflictError, NotFoundError
from partner_memory.model import Record
from partner_memory.store.base import MemoryStore


@dataclass(slots=True)
class CopyReport(Record):
    source: str
    destination: str
    namespaces: list[str] = field(default_factory=list)
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
    for name in names:
        dump = source.export_namespace(name)
        destination.import_namespace(dump)
        report.namespaces.append(name)
        report.units += len(dump.units)
        report.messages += len(dump.messages)
        report.rollings += len(dump.rollings)
    return report
