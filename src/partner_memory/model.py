"""Value objects of the storage model (R1-R3): messages, slices and units.

They are frozen so that what a caller holds never drifts from what was
stored; validation happens here, once, so every backend stores the same thing.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from partner_memory.errors import InvalidInputError

Role = Literal["user", "assistant", "system"]
ROLES: frozenset[str] = frozenset(get_args(Role))
MAX_NAMESPACE_LENGTH = 200


def new_id() -> str:
    """A fresh random UUID string, the id form the reference uses everywhere."""
    return str(uuid.uuid4())


def check_text(value: object, field_name: str) -> str:
    """Accept only text that every backend can store byte-for-byte.

    PostgreSQL rejects NUL characters and no backend can encode lone
    surrogates, so both are refused up front instead of failing in one
    backend only.
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{field_name} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInputError(f"{field_name} contains a NUL character, which cannot be stored")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{field_name} is not valid Unicode text: {exc.reason}") from None
    return value


def check_index(value: object, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{field_name} must be an integer, got {type(value).__name__}")
    return value


def check_namespace(name: object) -> str:
    """Namespace names are user-facing keys: non-blank, printable, bounded."""
    text = check_text(name, "namespace")
    if not text.strip():
        raise InvalidInputError("namespace must not be blank")
    if len(text) > MAX_NAMESPACE_LENGTH:
        raise InvalidInputError(f"namespace is longer than {MAX_NAMESPACE_LENGTH} characters")
    if any(not ch.isprintable() for ch in text):
        raise InvalidInputError(f"namespace {text!r} contains control characters")
    return text


def dump_metadata(metadata: dict[str, Any]) -> str:
    """Serialise metadata exactly once, so backends store identical JSON text."""
    try:
        return json.dumps(metadata, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"message metadata is not JSON-serialisable: {exc}") from None


def load_metadata(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):  # pragma: no cover - only written by dump_metadata
        raise InvalidInputError("stored message metadata is not a JSON object")
    return value


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message (R1); `id`, `timestamp` and `metadata` go beyond the reference."""

    role: Role
    content: str
    id: str = field(default_factory=new_id)
    timestamp: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            allowed = ", ".join(sorted(ROLES))
            raise InvalidInputError(f"message role must be one of {allowed}, got {self.role!r}")
        check_text(self.content, "message content")
        check_text(self.id, "message id")
        if not self.id:
            raise InvalidInputError("message id must not be empty")
        if self.timestamp is not None:
            check_index(self.timestamp, "message timestamp")
        if not isinstance(self.metadata, dict):
            raise InvalidInputError(
                f"message metadata must be a JSON object, got {type(self.metadata).__name__}"
            )
        dump_metadata(self.metadata)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": self.role,
            "content": self.content,
            "timestamp": self.timestamp,
            "metadata": self.metadata,
        }


@dataclass(frozen=True, slots=True)
class MemorySlice:
    """A summary of the half-open message range [start_index, end_index) of a unit (R2)."""

    id: str
    start_index: int
    end_index: int
    summary: str
    timestamp: int
    #: Which summariser wrote `summary` ("llm", "extractive", "placeholder"); None if unknown.
    summarizer: str | None = None

    def __len__(self) -> int:
        return self.end_index - self.start_index

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "start_index": self.start_index,
            "end_index": self.end_index,
            "summary": self.summary,
            "timestamp": self.timestamp,
            "summarizer": self.summarizer,
        }


@dataclass(frozen=True, slots=True)
class UnitInfo:
    """What is known of a unit without reading its messages (R8)."""

    id: str
    timestamp: int
    message_count: int
    slice_count: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "timestamp": self.timestamp,
            "message_count": self.message_count,
            "slice_count": self.slice_count,
        }


@dataclass(frozen=True, slots=True)
class MemoryUnit:
    """A whole unit (R3): every message of one memory session and its slices."""

    id: str
    timestamp: int
    conversation_messages: tuple[Message, ...]
    slices: tuple[MemorySlice, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "timestamp": self.timestamp,
            "conversation_messages": [m.to_dict() for m in self.conversation_messages],
            "slices": [s.to_dict() for s in self.slices],
        }


@dataclass(frozen=True, slots=True)
class UnitUpdate:
    """The outcome of `update_memory_unit`: the unit's new header and the slice added."""

    unit: UnitInfo
    slice: MemorySlice


@dataclass(frozen=True, slots=True)
class NamespaceInfo:
    name: str
    memory_session_id: str
    unit_count: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "memory_session_id": self.memory_session_id,
            "unit_count": self.unit_count,
        }


@dataclass(frozen=True, slots=True)
class TrajectoryState:
    """The persisted conversation window of a namespace (R9) and its last interaction."""

    messages: list[Message]
    last_interaction: int | None


@dataclass(frozen=True, slots=True)
class RollingRecord:
    """What one rolling cost: the slice it wrote, its LLM calls, tokens and times."""

    unit_id: str
    slice_id: str
    started_at: int
    idle: bool
    messages: int
    summarizer: str
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: float = 0.0
    pipeline_ms: float = 0.0
    fallbacks: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit_id": self.unit_id,
            "slice_id": self.slice_id,
            "started_at": self.started_at,
            "idle": self.idle,
            "messages": self.messages,
            "summarizer": self.summarizer,
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "llm_ms": self.llm_ms,
            "pipeline_ms": self.pipeline_ms,
            "fallbacks": list(self.fallbacks),
        }


@dataclass(frozen=True, slots=True)
class RollingTotals:
    """Sums over every rolling of a namespace, so LLM cost is never hidden."""

    rollings: int
    messages: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_ms: float
    pipeline_ms: float
    by_summarizer: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rollings": self.rollings,
            "messages": self.messages,
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "llm_ms": self.llm_ms,
            "pipeline_ms": self.pipeline_ms,
            "by_summarizer": self.by_summarizer,
        }
