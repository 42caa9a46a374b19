"""Parse a reference state directory with the reference's skip rules and R6.

Messages lacking role or content and slices lacking any field are skipped, as
the reference does on load; everything else that is malformed (bad JSON, wrong
types, a missing core or unit file) is an error naming the file and field, so
an import either takes the whole directory or nothing.

Ids the reference leaves implicit are derived deterministically from the
namespace, unit and position, so importing the same directory twice yields
the same ids and changes nothing. Only regular files inside the directory
are read, each at most MAX_FILE_BYTES: a FIFO, a device or a link leading
out of the directory is refused rather than waited on or followed.
"""

from __future__ import annotations

import json
import os
import stat
import uuid
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from partner_memory.errors import InvalidInputError
from partner_memory.model import (
    ROLES,
    MemorySlice,
    MemoryUnit,
    Message,
    check_text,
    check_timestamp,
)
from partner_memory.normalize import RawSlice, normalize_slice, normalize_unit_timestamp

CORE_FILE = Path("core") / "memory.json"
COGNITION_FILE = Path("core") / "cognition.json"
UNIT_DIR = Path("core") / "memory"
SLICE_FIELDS = ("id", "start_index", "end_index", "summary", "created_timestamp")
_ID_NAMESPACE = uuid.UUID("6f1c1b0e-4a8e-4d55-9a43-2f6f0c6d9b21")
#: The largest state file read (a unit of ~1M messages); larger is refused.
MAX_FILE_BYTES = 512 * 1024 * 1024
#: The derivation key of window messages: no unit id can equal it (NUL is refused).
WINDOW_KEY = "\x00window"


def unit_file_name(unit_id: str) -> str:
    """`memory-unit<ID>.json`, the reference's name, refusing ids that are not file-safe."""
    check_text(unit_id, "unit id")
    if not unit_id.strip() or unit_id in (".", "..") or any(c in unit_id for c in "/\\"):
        raise InvalidInputError(f"unit id {unit_id!r} cannot be used as a file name")
    return f"memory-unit{unit_id}.json"


def derived_id(*parts: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, "\x1f".join(parts)))


@dataclass(frozen=True, slots=True)
class PartnerState:
    """A parsed state directory: the session, the units in set order, and what was skipped."""

    memory_session_id: str
    units: list[MemoryUnit]
    #: The trajectory from core/cognition.json, None when the file is absent.
    chat_messages: list[Message] | None = None
    skipped: list[str] = field(default_factory=list)
    normalised: list[str] = field(default_factory=list)


def _read_bounded(root: Path, relative: Path, label: str) -> str:
    """A regular file inside `root`, at most MAX_FILE_BYTES, as text."""
    try:
        path = (root / relative).resolve(strict=True)
    except FileNotFoundError:
        raise InvalidInputError(f"{label}: file is missing") from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise InvalidInputError(f"{label}: cannot read file: {exc}") from None
    if not path.is_relative_to(root.resolve()):
        raise InvalidInputError(f"{label}: links outside the state directory ({path})")
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInputError(f"{label}: not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise InvalidInputError(f"{label}: larger than {MAX_FILE_BYTES // 2**20} MiB")
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInputError(f"{label}: cannot read file: {exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInputError(f"{label}: larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{label}: not UTF-8 (byte {exc.start})") from None


def _load_json(root: Path, relative: Path, label: str) -> Any:
    text = _read_bounded(root, relative, label)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{label}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise InvalidInputError(f"{label}: invalid JSON: nested too deeply") from None


def _expect(value: Any, kind: type | tuple[type, ...], label: str) -> Any:
    ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)
    if not ok:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InvalidInputError(f"{label} must be {names}, got {type(value).__name__}")
    return value


class _UnitReader:
    """Parses one unit file; collects skip and normalisation notes as it goes."""

    def __init__(self, namespace: str, unit_id: str, label: str, now: int) -> None:
        self.namespace, self.unit_id, self.label, self.now = namespace, unit_id, label, now
        self.skipped: list[str] = []
        self.normalised: list[str] = []

    def read(self, data: Any) -> MemoryUnit:
        _expect(data, dict, self.label)
        file_id = data.get("id")
        if file_id is not None and file_id != self.unit_id:
            raise InvalidInputError(
                f"{self.label}: field 'id' is {file_id!r} but the unit set names {self.unit_id!r}"
            )
        raw_time = data.get("update_timestamp")
        if raw_time is not None:
            _expect(raw_time, int, f"{self.label}: field 'update_timestamp'")
            _checked(check_timestamp, raw_time, f"{self.label}: field 'update_timestamp'")
        timestamp = normalize_unit_timestamp(raw_time, self.now)
        if timestamp != raw_time:
            self.normalised.append(f"{self.label}: update_timestamp {raw_time!r} set to now")
        messages = self._messages(data.get("conversation_messages"))
        slices = self._slices(data.get("memory_slices"), len(messages), timestamp)
        return MemoryUnit(
            id=self.unit_id,
            timestamp=timestamp,
            conversation_messages=tuple(messages),
            slices=tuple(slices),
        )

    def _messages(self, raw: Any, field_name: str = "conversation_messages") -> list[Message]:
        if raw is None:
            return []
        _expect(raw, list, f"{self.label}: field '{field_name}'")
        messages: list[Message] = []
        for i, item in enumerate(raw):
            where = f"{self.label}: {field_name}[{i}]"
            if item is None or (
                isinstance(item, dict) and (item.get("role") is None or item.get("content") is None)
            ):
                self.skipped.append(f"{where}: lacks role or content, skipped")
                continue
            _expect(item, dict, where)
            role = _expect(item["role"], str, f"{where}.role")
            content = _expect(item["content"], str, f"{where}.content")
            if role not in ROLES:
                raise InvalidInputError(
                    f"{where}.role must be one of {', '.join(sorted(ROLES))}, got {role!r}"
                )
            try:
                message_id = derived_id(self.namespace, self.unit_id, str(len(messages)))
                messages.append(Message(role=role, content=content, id=message_id))
            except InvalidInputError as exc:
                raise InvalidInputError(f"{where}: {exc}") from None
        return messages

    def _slices(self, raw: Any, message_count: int, unit_timestamp: int) -> list[MemorySlice]:
        if raw is None:
            return []
        _expect(raw, list, f"{self.label}: field 'memory_slices'")
        slices: list[MemorySlice] = []
        ids: dict[str, int] = {}
        for i, item in enumerate(raw):
            where = f"{self.label}: memory_slices[{i}]"
            if item is None:
                self.normalised.append(f"{where}: null slice dropped")
                continue
            _expect(item, dict, where)
            missing = [f for f in SLICE_FIELDS if item.get(f) is None]
            if missing:
                self.skipped.append(f"{where}: lacks {', '.join(missing)}, skipped")
                continue
            raw_slice = RawSlice(
                id=_expect(item["id"], str, f"{where}.id"),
                start_index=_expect(item["start_index"], int, f"{where}.start_index"),
                end_index=_expect(item["end_index"], int, f"{where}.end_index"),
                summary=_expect(item["summary"], str, f"{where}.summary"),
                timestamp=_expect(item["created_timestamp"], int, f"{where}.created_timestamp"),
            )
            _checked(check_text, raw_slice.id, f"{where}.id")
            _checked(check_text, raw_slice.summary, f"{where}.summary")
            _checked(check_timestamp, raw_slice.timestamp, f"{where}.created_timestamp")
            slice_id = str(raw_slice.id)
            if slice_id in ids:
                raise InvalidInputError(
                    f"{where}.id {slice_id!r} repeats memory_slices[{ids[slice_id]}]'s"
                )
            ids[slice_id] = i
            fixed = normalize_slice(
                raw_slice,
                message_count,
                unit_timestamp,
                partial(derived_id, self.namespace, self.unit_id, "slice", str(i)),
            )
            if (fixed.id, fixed.start_index, fixed.end_index, fixed.timestamp) != (
                raw_slice.id,
                raw_slice.start_index,
                raw_slice.end_index,
                raw_slice.timestamp,
            ):
                self.normalised.append(f"{where}: normalised (R6)")
            slices.append(fixed)
        ordered = sorted(slices, key=lambda s: s.timestamp)
        if ordered != slices:
            self.normalised.append(f"{self.label}: slices sorted by timestamp (R6)")
        return ordered


def _checked(check: Any, value: Any, label: str) -> None:
    """Run a model check, naming the file and field in its error."""
    try:
        check(value, "value")
    except InvalidInputError as exc:
        raise InvalidInputError(f"{label}: {str(exc).removeprefix('value ')}") from None


def read_partner_state(state_dir: str | Path, *, namespace: str, now: int) -> PartnerState:
    """Parse a whole state directory, or raise InvalidInputError naming what is wrong
    (the directory, then the file and field in it)."""
    root = Path(state_dir)
    if not root.is_dir():
        raise InvalidInputError(f"state directory {root} does not exist or is not a directory")
    try:
        return _read_state(root, namespace=namespace, now=now)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{root}: {exc}") from None


def _read_state(root: Path, *, namespace: str, now: int) -> PartnerState:
    core = _load_json(root, CORE_FILE, str(CORE_FILE))
    _expect(core, dict, str(CORE_FILE))
    if core.get("memory_session_id") is None:
        raise InvalidInputError(f"{CORE_FILE}: field 'memory_session_id' is missing")
    if core.get("memory_unit_uuid_set") is None:
        raise InvalidInputError(f"{CORE_FILE}: field 'memory_unit_uuid_set' is missing")
    session_id = _expect(core["memory_session_id"], str, f"{CORE_FILE}: field 'memory_session_id'")
    try:  # the session names the unit the next rolling extends: it must be a usable unit id
        unit_file_name(session_id)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{CORE_FILE}: field 'memory_session_id': {exc}") from None
    unit_ids = _expect(
        core["memory_unit_uuid_set"], list, f"{CORE_FILE}: field 'memory_unit_uuid_set'"
    )
    state = PartnerState(memory_session_id=session_id, units=[])
    seen: set[str] = set()
    for i, unit_id in enumerate(unit_ids):
        _expect(unit_id, str, f"{CORE_FILE}: memory_unit_uuid_set[{i}]")
        if unit_id in seen:
            state.normalised.append(f"{CORE_FILE}: unit {unit_id!r} listed twice, kept once")
            continue
        seen.add(unit_id)
        try:
            name = unit_file_name(unit_id)
        except InvalidInputError as exc:
            raise InvalidInputError(f"{CORE_FILE}: memory_unit_uuid_set[{i}]: {exc}") from None
        label = str(UNIT_DIR / name)
        reader = _UnitReader(namespace, unit_id, label, now)
        state.units.append(reader.read(_load_json(root, UNIT_DIR / name, label)))
        state.skipped.extend(reader.skipped)
        state.normalised.extend(reader.normalised)
    if (root / COGNITION_FILE).exists() or (root / COGNITION_FILE).is_symlink():
        cognition = _load_json(root, COGNITION_FILE, str(COGNITION_FILE))
        _expect(cognition, dict, str(COGNITION_FILE))
        reader = _UnitReader(namespace, WINDOW_KEY, str(COGNITION_FILE), now)
        chat = reader._messages(cognition.get("chat_messages"), "chat_messages")
        state.skipped.extend(reader.skipped)
        return replace(state, chat_messages=chat)
    return state
