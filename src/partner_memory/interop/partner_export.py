"""Export a namespace as a reference state directory the reference can load.

Files are written to a temporary name and renamed into place, so a crash
never leaves a half-written JSON file; units are read one at a time, so
memory use is bounded by the largest unit, not the namespace.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from partner_memory.core import MemoryCore
from partner_memory.errors import InvalidInputError
from partner_memory.interop.partner_state import (
    COGNITION_FILE,
    CORE_FILE,
    UNIT_DIR,
    unit_file_name,
)
from partner_memory.model import MemoryUnit, Record


@dataclass(frozen=True, slots=True)
class ExportReport(Record):
    json_keys: ClassVar[Mapping[str, str]] = {
        "units": "unit_count",
        "messages": "message_count",
        "slices": "slice_count",
    }

    namespace: str
    out_dir: str
    units: int
    messages: int
    slices: int


def unit_document(unit: MemoryUnit) -> dict[str, Any]:
    """A unit in the reference's JSON shape (role and content only, as it stores)."""
    return {
        "id": unit.id,
        "update_timestamp": unit.timestamp,
        "conversation_messages": [
            {"role": m.role, "content": m.content} for m in unit.conversation_messages
        ],
        "memory_slices": [
            {
                "id": s.id,
                "start_index": s.start_index,
                "end_index": s.end_index,
                "summary": s.summary,
                "created_timestamp": s.timestamp,
            }
            for s in unit.slices
        ],
    }


def _write_json(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, ensure_ascii=False, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export_partner_state(core: MemoryCore, out_dir: str | Path) -> ExportReport:
    """Write the namespace of `core` under `out_dir` in the reference's layout."""
    root = Path(out_dir)
    if root.exists() and not root.is_dir():
        raise InvalidInputError(f"export target {root} exists and is not a directory")
    unit_ids = core.unit_ids()
    names = [unit_file_name(unit_id) for unit_id in unit_ids]  # validate before writing
    messages = slices = 0
    try:
        for unit_id, name in zip(unit_ids, names, strict=True):
            unit = core.get_memory_unit(unit_id)
            messages += len(unit.conversation_messages)
            slices += len(unit.slices)
            _write_json(root / UNIT_DIR / name, unit_document(unit))
        window = core.store.load_trajectory(core.namespace).messages
        _write_json(
            root / COGNITION_FILE,
            {"chat_messages": [{"role": m.role, "content": m.content} for m in window]},
        )
        _write_json(
            root / CORE_FILE,
            {"memory_session_id": core.memory_session_id, "memory_unit_uuid_set": unit_ids},
        )
    except OSError as exc:
        raise InvalidInputError(f"cannot write export to {root}: {exc}") from exc
    return ExportReport(core.namespace, str(root), len(unit_ids), messages, slices)
