"""Value objects of the storage model (R1-R3): messages, slices and units.

They are frozen so that what a caller holds never drifts from what was
stored; validation happens here, once, so every backend stores the same thing.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import Field, dataclass, field, fields
from enum import Enum
from types import UnionType
from typing import Any, ClassVar, Literal, Self, Union, cast, get_args, get_origin, get_type_hints

import orjson

from partner_memory import json_text
from partner_memory import markers as r11
from partner_memory.errors import InvalidInputError

Role = Literal["user", "assistant", "system"]
ROLES: frozenset[str] = frozenset(get_args(Role))
MAX_NAMESPACE_LENGTH = 200

#: A topic path's levels are joined by this ("project->partner->memory").
TOPIC_SEPARATOR = "->"


class Record:
    """`to_dict()` for the value objects: the JSON every interface prints or sends.

    One vocabulary (docs/json.md): a count is `<thing>_count`, a plural key is a
    list, a namespace is `namespace`, times are epoch milliseconds (`timestamp`,
    `*_at`) and durations `*_ms`. Where a Python attribute reads better under
    another name, `json_keys` maps it, so the attribute and the JSON never drift.
    """

    __slots__ = ()

    #: Attribute name -> JSON key, for the attributes the vocabulary names otherwise.
    json_keys: ClassVar[Mapping[str, str]] = {}

    def to_dict(self) -> dict[str, Any]:
        return {
            self.json_keys.get(f.name, f.name): plain(getattr(self, f.name)) for f in _fields(self)
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The record a `to_dict()` document describes (what the HTTP client reads back);
        keys the record does not know are ignored, so documents may grow."""
        hints = get_type_hints(cls)
        given = {}
        for f in _fields(cls):
            key = cls.json_keys.get(f.name, f.name)
            if key in data:
                given[f.name] = _typed(hints[f.name], data[key])
        return cls(**given)


def _fields(record: object) -> tuple[Field[Any], ...]:
    """The dataclass fields of a record (its subclasses are dataclasses; `Record` is not)."""
    found: tuple[Field[Any], ...] = fields(cast(Any, record))
    return found


def _typed(hint: Any, value: Any) -> Any:
    """`value` (JSON data) as the type `hint` names: records, enums, lists, tuples."""
    if value is None:
        return None
    origin, arguments = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType):
        usable = [a for a in arguments if a is not type(None)]
        return _typed(usable[0], value) if len(usable) == 1 else value
    if origin in (list, tuple, Sequence) and isinstance(value, list):
        items = [_typed(arguments[0], v) for v in value] if arguments else value
        return tuple(items) if origin is tuple else items
    if isinstance(hint, type) and issubclass(hint, Record) and isinstance(value, Mapping):
        return hint.from_dict(value)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint(value)
    return value


def plain(value: Any) -> Any:
    """`value` as JSON-ready data: records as their documents, floats to the microsecond."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, float):
        return round(value, 3)
    return value


#: Where ids' random bits come from: seeded from the system's randomness, again in a
#: forked child. Not os.urandom per id: that system call lets go of the GIL, and when
#: other threads are busy taking it back costs up to a switch interval (5 ms) - in a
#: replay of 1,000 rollings, 0.45 s went to it. Ids need to be unique, not secret.
_random_bits = random.Random()
os.register_at_fork(after_in_child=_random_bits.seed)


def new_id() -> str:
    """A fresh random UUID (version 4) string, the id form the reference uses everywhere."""
    return str(uuid.UUID(int=_random_bits.getrandbits(128), version=4))


def new_message_id() -> str:
    """A time-ordered UUID (version 7, RFC 9562) for messages.

    Message ids are indexed; ids that grow with time land at the end of the
    index instead of at random places in it, which keeps appends to a large
    store as cheap as to a small one.
    """
    ms = time.time_ns() // 1_000_000
    rand = _random_bits.getrandbits(80)
    value = (
        (ms & 0xFFFF_FFFF_FFFF) << 80
        | 0x7 << 76
        | (rand >> 68 & 0xFFF) << 64
        | 0b10 << 62
        | rand & ((1 << 62) - 1)
    )
    return str(uuid.UUID(int=value))


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


#: The latest time a timestamp may name (9999-12-31, in ms): beyond it no date
#: renders and no backend's 64-bit column holds every value.
MAX_TIMESTAMP = 253_402_300_799_999


def check_timestamp(value: object, field_name: str) -> int:
    """A time in ms since the epoch, between 1970 and the year 9999."""
    ms = check_index(value, field_name)
    if not 0 <= ms <= MAX_TIMESTAMP:
        raise InvalidInputError(
            f"{field_name} {ms} is not a time in ms between 1970 and 9999 (0..{MAX_TIMESTAMP})"
        )
    return ms


def check_index(value: object, field_name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{field_name} must be an integer, got {type(value).__name__}")
    return value


def check_limit(value: object) -> int:
    """A page size: a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"limit must be a positive integer, got {value!r}")
    return value


def check_page(offset: object, limit: object) -> None:
    """A page of rows: `offset` a non-negative integer, `limit` a positive one or None."""
    if check_index(offset, "offset") < 0:
        raise InvalidInputError(f"offset must not be negative, got {offset}")
    if limit is not None:
        check_limit(limit)


def check_messages(messages: Iterable[object]) -> list[Message]:
    """The messages as a list, refusing anything that is not a `Message` by its position."""
    if isinstance(messages, Message | str | bytes | dict) or not isinstance(messages, Iterable):
        raise InvalidInputError(
            f"messages must be a list of Message, got {type(messages).__name__}"
        )
    batch: list[Message] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Message):
            raise InvalidInputError(
                f"messages[{i}] must be a Message, got {type(message).__name__}"
            )
        batch.append(message)
    return batch


def newest(times: Iterable[int | None]) -> int | None:
    """The latest of these times, None where none is known."""
    known = [t for t in times if t is not None]
    return max(known) if known else None


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


#: One encoder for every message: `json.dumps` with options builds one per call, which
#: was half of the cost of storing a message's metadata.
_METADATA_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
#: Values orjson writes exactly as `_METADATA_JSON` does (ints beyond 64 bits and strings
#: that are not UTF-8 it refuses, and those go to the standard encoder). Floats are not
#: among them: orjson writes 1e16 as "1e16", not "1e+16", and NaN as null.
_AS_STDLIB = frozenset({str, int, bool, type(None)})


def dump_metadata(metadata: dict[str, Any]) -> str:
    """Serialise metadata exactly once, so backends store identical JSON text. Keys must
    be strings: json would turn 1 into "1", and what comes back would differ.

    Flat metadata of strings, integers, booleans and nulls (a transcript's speaker and
    turn id) is written by orjson, 13 times faster here (0.26 against 3.4 µs a LoCoMo
    message), with the same text; anything else by the standard library's encoder."""
    if all(map(_AS_STDLIB.__contains__, map(type, metadata.values()))):
        try:
            return orjson.dumps(metadata).decode()
        except TypeError:  # orjson refused it: a key that is no str, a big int, a surrogate
            pass
    odd = next((k for k in metadata if not isinstance(k, str)), None)
    if odd is not None:
        raise InvalidInputError(
            f"message metadata keys must be strings, got {type(odd).__name__} {odd!r}"
        )
    try:
        text = _METADATA_JSON.encode(metadata)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"message metadata is not JSON-serialisable: {exc}") from None
    # a lone surrogate is written as itself, which no backend can store (NUL is escaped)
    return check_text(text, "message metadata")


def load_metadata(text: str | None) -> dict[str, Any]:
    """Metadata as `dump_metadata` wrote it (`json_text`: orjson where it reads the same)."""
    if not text:
        return {}
    value = json_text.loads(text)
    if not isinstance(value, dict):  # pragma: no cover - only written by dump_metadata
        raise InvalidInputError("stored message metadata is not a JSON object")
    return value


@dataclass(frozen=True, slots=True)
class Message(Record):
    """One chat message (R1); `id`, `timestamp` and `metadata` go beyond the reference."""

    role: Role
    content: str
    id: str = field(default_factory=new_message_id)
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
            check_timestamp(self.timestamp, "message timestamp")
        if not isinstance(self.metadata, dict):
            raise InvalidInputError(
                f"message metadata must be a JSON object, got {type(self.metadata).__name__}"
            )
        if self.metadata:
            dump_metadata(self.metadata)

    @classmethod
    def stored(
        cls, id: str, role: Role, content: str, timestamp: int | None, metadata: dict[str, Any]
    ) -> Message:
        """A message read back from a store, which checked it when it was written: built
        without checking again (a rolling and its consumers read thousands a second)."""
        message = object.__new__(cls)
        put = object.__setattr__
        put(message, "id", id)
        put(message, "role", role)
        put(message, "content", content)
        put(message, "timestamp", timestamp)
        put(message, "metadata", metadata)
        return message

    # The stored `content` follows R11 (a marker line, a blank line, the body); what a
    # caller recorded is `text`, who said it `speaker`, and the status markers `markers`.

    @property
    def text(self) -> str:
        """The body as recorded, without the R11 marker line."""
        return r11.parse(self.content).body

    @property
    def speaker(self) -> str | None:
        """Who said it: the transcript's `speaker` metadata, else the marker's name
        (`[USER: Mei]` -> Mei, `[USER]` -> USER, the agent's own -> AGENT); None for a
        plain message without either."""
        return self.speaker_named(r11.parse(self.content).identity)

    def speaker_named(self, identity: str | None) -> str | None:
        """`speaker` for a content whose marker identity the caller has parsed already."""
        named = self.metadata.get("speaker")
        if isinstance(named, str) and named.strip():
            return named.strip()
        return None if identity is None else r11.speaker(identity) or None

    @property
    def markers(self) -> tuple[str, ...]:
        """Status markers after the identity: NOT_REPLIED (not shown to the user), ..."""
        return r11.parse(self.content).statuses

    def to_dict(self) -> dict[str, Any]:
        parsed = r11.parse(self.content)
        document = Record.to_dict(self)  # not super(): slots=True makes a new class
        document["text"] = parsed.body
        document["speaker"] = self.speaker_named(parsed.identity)
        document["markers"] = list(parsed.statuses)
        return document


@dataclass(frozen=True, slots=True)
class MemorySlice(Record):
    """A summary of the half-open message range [start_index, end_index) of a unit (R2)."""

    id: str
    start_index: int
    end_index: int
    summary: str
    timestamp: int
    #: Which summariser wrote `summary` ("llm", "extractive", "placeholder"); None if unknown.
    summarizer: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InvalidInputError(f"slice id must be a non-empty string, got {self.id!r}")
        start = check_index(self.start_index, "slice start_index")
        if not 0 <= start <= check_index(self.end_index, "slice end_index"):
            raise InvalidInputError(
                f"slice range [{start}, {self.end_index}) must have 0 <= start <= end"
            )
        check_index(self.timestamp, "slice timestamp")

    def __len__(self) -> int:
        return self.end_index - self.start_index


@dataclass(frozen=True, slots=True)
class UnitInfo(Record):
    """What is known of a unit without reading its messages (R8)."""

    id: str
    timestamp: int
    message_count: int
    slice_count: int


@dataclass(frozen=True, slots=True)
class MemoryUnit(Record):
    """A whole unit (R3): every message of one memory session and its slices."""

    id: str
    timestamp: int
    conversation_messages: tuple[Message, ...]
    slices: tuple[MemorySlice, ...]


@dataclass(frozen=True, slots=True)
class UnitUpdate(Record):
    """The outcome of `update_memory_unit`: the unit's new header and the slice added."""

    unit: UnitInfo
    slice: MemorySlice


@dataclass(frozen=True, slots=True)
class NamespaceInfo(Record):
    json_keys: ClassVar[Mapping[str, str]] = {"name": "namespace"}

    name: str
    memory_session_id: str
    unit_count: int
    slice_count: int = 0


@dataclass(frozen=True, slots=True)
class NamespaceOverview(Record):
    """A namespace at a glance, for a list of many: sizes, last activity and LLM cost."""

    json_keys: ClassVar[Mapping[str, str]] = {"name": "namespace"}

    name: str
    unit_count: int
    slice_count: int
    #: Messages kept in units (rolled), and in the window now.
    message_count: int
    window_count: int
    rolling_count: int
    llm_tokens: int
    #: The newest interaction or unit, ms since the epoch (None: nothing yet).
    last_activity: int | None


@dataclass(frozen=True, slots=True)
class WindowActivity(Record):
    """What the triggers need to know of a window, without reading its messages."""

    length: int
    last_interaction: int | None
    idle_rolled_for: int | None = None


@dataclass(frozen=True, slots=True)
class TrajectoryState(Record):
    """The persisted conversation window of a namespace (R9) and its last interaction."""

    messages: list[Message]
    #: Each message's interaction time (ms; None where none was given), in window order.
    interactions: tuple[int | None, ...]
    #: The last interaction an idle rolling already covered (R14 fires once per quiet).
    idle_rolled_for: int | None = None

    @property
    def last_interaction(self) -> int | None:
        """The newest interaction in the window (None: none)."""
        return newest(self.interactions)

    @property
    def activity(self) -> WindowActivity:
        return WindowActivity(len(self.messages), self.last_interaction, self.idle_rolled_for)


@dataclass(frozen=True, slots=True)
class WindowMessage(Record):
    """A message of the window and the time of the interaction that brought it (ms)."""

    message: Message
    interaction: int | None

    def to_dict(self) -> dict[str, Any]:
        """The message's own document with `interaction` beside its keys."""
        return self.message.to_dict() | {"interaction": self.interaction}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WindowMessage:
        interaction = data.get("interaction")
        return cls(Message.from_dict(data), None if interaction is None else int(interaction))


@dataclass(frozen=True, slots=True)
class Activation(Record):
    """What the latest recall left in a namespace's context, and when (ms).

    The three renderings of its block (R21), and what it quotes - messages by id,
    slices by (unit id, slice id) - so a forget of any of them takes it away."""

    at: int
    full: str
    compact: str | None
    abstract: str | None
    message_ids: tuple[str, ...] = ()
    slices: tuple[tuple[str, str], ...] = ()

    def quotes(
        self,
        *,
        messages: Collection[str] = (),
        slices: Collection[str] = (),
        units: Collection[str] = (),
    ) -> bool:
        """Whether it quotes one of these messages, slices (by id) or units: a forget of
        any of them takes it away."""
        return bool(set(self.message_ids).intersection(messages)) or any(
            s in slices or u in units for u, s in self.slices
        )


@dataclass(frozen=True, slots=True)
class ContextState(Record):
    """What a namespace's context is made of, read at once: its newest slices (newest
    first, with unit ids), the latest recall's activation, its held blocks' JSON."""

    slices: list[tuple[str, MemorySlice]]
    activation: Activation | None
    held: str | None = None


@dataclass(frozen=True, slots=True)
class RollingCost(Record):
    """What one rolling cost: LLM calls, tokens and times, and why a fallback was used."""

    json_keys: ClassVar[Mapping[str, str]] = {
        "llm_calls": "llm_call_count",
        "fallbacks": "fallback_reasons",
    }

    summarizer: str
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: float = 0.0
    pipeline_ms: float = 0.0
    fallbacks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RollingRecord(Record):
    """One rolling as the inspector lists it: when, why, what it rolled and what it cost."""

    seq: int
    started_at: int
    idle: bool
    unit_id: str
    slice_id: str
    messages: int
    cost: RollingCost


@dataclass(frozen=True, slots=True)
class RollingTotals(Record):
    """Sums over every rolling of a namespace, so LLM cost is never hidden."""

    json_keys: ClassVar[Mapping[str, str]] = {
        "rollings": "rolling_count",
        "messages": "message_count",
        "llm_calls": "llm_call_count",
        "fallbacks": "fallback_count",
        "recent_fallbacks": "recent_fallback_reasons",
    }

    rollings: int
    messages: int
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    llm_ms: float
    pipeline_ms: float
    by_summarizer: dict[str, int]
    #: Rollings whose LLM call failed and fell back, and the latest reasons (newest first).
    fallbacks: int = 0
    recent_fallbacks: tuple[str, ...] = ()
    #: AfterRolling consumers seen on this namespace: position and failures.
    consumers: tuple[ConsumerStatus, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerStatus(Record):
    """One AfterRolling consumer on one namespace: how far it got and how it failed."""

    json_keys: ClassVar[Mapping[str, str]] = {"failures": "failure_count"}

    name: str
    #: Durable consumers track their position in the rolling log; others run in memory.
    durable: bool
    #: The last rolling (log sequence number) a durable consumer processed.
    position: int
    #: The namespace's newest rolling; `head - position` is a durable consumer's lag.
    head: int
    failures: int
    last_error: str | None
    last_failure_at: int | None


@dataclass(frozen=True, slots=True)
class LogEntry(Record):
    """One rolling as the ordered per-namespace log keeps it, with its cost, for consumers."""

    namespace: str
    #: 1, 2, 3, ... per namespace, in commit order.
    seq: int
    unit: UnitInfo
    slice: MemorySlice
    messages: tuple[Message, ...]
    idle: bool
    rolling_size: int
    retain_divisor: int | None
    cost: RollingCost
