"""What a recall may be kept to beyond time and topic: role, speaker, unit, metadata.

A filter is exact: the index holds each message's role, speaker, unit and one
term per top-level metadata entry (`metadata_tags`), so a filter is a clause
of the engine's query, not a check on its best hits; the window's messages are
checked against it in Python, the same way. Metadata values compare as JSON
(1 and 1.0 are equal, 1 and true are not; a list or object equals one with the
same items).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from partner_memory.errors import InvalidInputError
from partner_memory.model import ROLES, Role, check_text

#: Metadata entries one filter may name.
MAX_METADATA_KEYS = 20


def wire(
    description: str, *, min_length: int | None = None, max_length: int | None = None
) -> dict[str, Any]:
    """A filter field's description and bounds, which the interfaces that publish a
    schema (HTTP, MCP) declare it with, so a new filter is written here once."""
    return {"description": description, "min_length": min_length, "max_length": max_length}


@dataclass(frozen=True, slots=True)
class RecallFilter:
    """Only messages with this role ("user", "assistant", "system"), said by this
    speaker (case-insensitive), stored in this unit (the window's messages are in
    none yet), and whose metadata holds each of these key/value pairs."""

    role: Role | None = field(default=None, metadata=wire("Only messages of this role."))
    speaker: str | None = field(
        default=None,
        metadata=wire("Only what this participant said (any case).", min_length=1, max_length=200),
    )
    unit: str | None = field(
        default=None,
        metadata=wire("Only this unit's messages (a unit id).", min_length=1, max_length=200),
    )
    metadata: Mapping[str, Any] = field(
        default_factory=dict,
        metadata=wire(
            "Only messages whose metadata holds each key with this value (as JSON).",
            max_length=MAX_METADATA_KEYS,
        ),
    )

    def used(self) -> list[str]:
        """The names of the filters set (what telemetry may say; their values it may not)."""
        named = [name for name in ("role", "speaker", "unit") if getattr(self, name) is not None]
        return [*named, "metadata"] if self.metadata else named

    def __post_init__(self) -> None:
        if self.role is not None and self.role not in ROLES:
            allowed = ", ".join(sorted(ROLES))
            raise InvalidInputError(f"role must be one of {allowed}, got {self.role!r}")
        for name in ("speaker", "unit"):
            value = getattr(self, name)
            if value is not None and not check_text(value, name).strip():
                raise InvalidInputError(f"{name} must not be empty")
        if not isinstance(self.metadata, Mapping):
            raise InvalidInputError(
                f"metadata must be an object of key/value pairs, got {type(self.metadata).__name__}"
            )
        if len(self.metadata) > MAX_METADATA_KEYS:
            raise InvalidInputError(
                f"metadata may name at most {MAX_METADATA_KEYS} keys, got {len(self.metadata)}"
            )
        for key, value in self.metadata.items():
            if not isinstance(key, str) or not key:
                raise InvalidInputError(f"metadata keys must be non-empty strings, got {key!r}")
            check_text(key, "metadata key")
            _canonical(value, f"metadata value of {key!r}")

    @property
    def empty(self) -> bool:
        return (
            self.role is None and self.speaker is None and self.unit is None and not self.metadata
        )

    @property
    def speaker_name(self) -> str | None:
        """The speaker as the index keeps it (lower-cased), or None."""
        return None if self.speaker is None else self.speaker.strip().lower()

    @property
    def tags(self) -> list[str]:
        """The index terms every admitted message holds, one per metadata pair."""
        return metadata_tags(self.metadata)

    def admits(self, role: str | None, speaker: str | None, unit: str | None, tags: Any) -> bool:
        """Whether a message of this role, speaker, unit and metadata tags is kept."""
        if self.role is not None and role != self.role:
            return False
        if self.speaker is not None and (speaker or "").lower() != self.speaker_name:
            return False
        if self.unit is not None and unit != self.unit:
            return False
        held = set(tags)
        return all(tag in held for tag in self.tags)


def metadata_tags(metadata: Mapping[str, Any]) -> list[str]:
    """A message's metadata as index terms: one per top-level key and its value."""
    return [_tag(key, value) for key, value in metadata.items()]


def _tag(key: str, value: Any) -> str:
    """A key and its value as one bounded term (values may be long or nested)."""
    text = f"{key}\x1f{_canonical(value, key)}"
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _canonical(value: Any, what: str) -> str:
    try:
        return json.dumps(
            _normalised(value), sort_keys=True, ensure_ascii=False, separators=(",", ":")
        )
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} is not a JSON value: {exc}") from None


def _normalised(value: Any) -> Any:
    """Numbers equal in JSON written alike (1.0 -> 1); bools stay bools."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        return {str(k): _normalised(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalised(v) for v in value]
    return value
