"""A turn to record and a forget to carry out, as values that cross the layers.

The interfaces (handle, aio, clients, HTTP, MCP, CLI) build one and pass it on;
the trajectory records a `TurnInput`, the service carries out a
`ForgetRequest`, and the client's request builder sends either as its wire
form (`to_dict`). A new field is added here and where it is acted on, not at
every door in between. (A recall's question is `recall.query.RecallQuery`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, Unpack, get_args

from partner_memory.errors import InvalidInputError
from partner_memory.model import check_text, check_timestamp

ForgetTarget = Literal["messages", "slice", "unit", "namespace"]
FORGET_TARGETS: tuple[str, ...] = get_args(ForgetTarget)


class TurnOptions(TypedDict, total=False):
    """The keyword form of a `TurnInput`'s options (`record_turn`'s keywords)."""

    source: str
    timestamp: int | None
    metadata: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class TurnInput:
    """One exchange to record: what the user said (as `source`, the R11 marker) and
    what the assistant answered, at `timestamp` (ms; now if None), the user message
    carrying `metadata`."""

    user_input: str
    assistant_output: str
    source: str = "USER"
    timestamp: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_text(self.user_input, "user_input")
        check_text(self.assistant_output, "assistant_output")
        check_text(self.source, "source")
        if "\n" in self.source or "\r" in self.source:
            raise InvalidInputError("source must be one line: it becomes the R11 marker line")
        if self.timestamp is not None:
            check_timestamp(self.timestamp, "timestamp")
        if not isinstance(self.metadata, Mapping):
            raise InvalidInputError(
                f"metadata must be an object, got {type(self.metadata).__name__}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "user_input": self.user_input,
            "assistant_output": self.assistant_output,
            "source": self.source,
            "timestamp": self.timestamp,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def of(
        cls, user_input: str, assistant_output: str, **options: Unpack[TurnOptions]
    ) -> TurnInput:
        """A turn from its two texts and `record_turn`'s keywords."""
        return cls.from_dict(
            {"user_input": user_input, "assistant_output": assistant_output} | dict(options)
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnInput:
        _known(data, ("user_input", "assistant_output", "source", "timestamp", "metadata"))
        for name in ("user_input", "assistant_output"):
            if name not in data:
                raise InvalidInputError(f"{name} is required")
        return cls(
            data["user_input"],
            data["assistant_output"],
            "USER" if data.get("source") is None else data["source"],
            data.get("timestamp"),
            data.get("metadata") or {},
        )


@dataclass(frozen=True, slots=True)
class ForgetRequest:
    """What to forget: messages by id, a slice (its summary and its messages), a unit,
    or the whole namespace."""

    target: ForgetTarget
    message_ids: tuple[str, ...] = ()
    unit_id: str | None = None
    slice_id: str | None = None

    def __post_init__(self) -> None:
        if self.target not in FORGET_TARGETS:
            raise InvalidInputError(
                f"target must be one of {', '.join(FORGET_TARGETS)}, got {self.target!r}"
            )
        if self.target == "messages":
            ids = self.message_ids
            if isinstance(ids, str) or not isinstance(ids, tuple):
                raise InvalidInputError("message_ids must be a list of ids")
            if not ids:
                raise InvalidInputError("no message to forget")
            for given in ids:
                if not isinstance(given, str) or not check_text(given, "message id").strip():
                    raise InvalidInputError(f"message ids must be non-empty text, got {given!r}")
        needed = {"slice": ("unit_id", "slice_id"), "unit": ("unit_id",)}.get(self.target, ())
        for name in needed:
            value = getattr(self, name)
            if not isinstance(value, str) or not check_text(value, name).strip():
                raise InvalidInputError(f"{name} is required to forget a {self.target}")

    @classmethod
    def messages(cls, message_ids: Sequence[str]) -> ForgetRequest:
        if isinstance(message_ids, str):
            raise InvalidInputError("message_ids must be a list of ids, not one string")
        return cls("messages", tuple(message_ids))

    @classmethod
    def slice(cls, unit_id: str, slice_id: str) -> ForgetRequest:
        return cls("slice", unit_id=unit_id, slice_id=slice_id)

    @classmethod
    def unit(cls, unit_id: str) -> ForgetRequest:
        return cls("unit", unit_id=unit_id)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"target": self.target}
        if self.target == "messages":
            out["message_ids"] = list(self.message_ids)
        if self.unit_id is not None:
            out["unit_id"] = self.unit_id
        if self.slice_id is not None:
            out["slice_id"] = self.slice_id
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ForgetRequest:
        _known(data, ("target", "message_ids", "unit_id", "slice_id"))
        ids = data.get("message_ids") or ()
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise InvalidInputError("message_ids must be a list of ids")
        return cls(data.get("target", ""), tuple(ids), data.get("unit_id"), data.get("slice_id"))


def _known(data: Mapping[str, Any], names: Sequence[str]) -> None:
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise InvalidInputError(f"unknown field(s): {', '.join(unknown)}")
