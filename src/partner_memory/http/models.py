"""Request bodies of the HTTP API, typed and bounded, so a bad field is a 422 naming it.

Answers are the documents of docs/json.md (`partner_memory.documents` and the
records' `to_dict()`), the same the CLI prints with `--json`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from partner_memory.model import MAX_NAMESPACE_LENGTH
from partner_memory.recall.query import MAX_K, filter_fields

#: Messages accepted in one request.
MAX_MESSAGES = 1000
#: The latest time accepted, ms (year 9999), and the earliest (1970).
MAX_MS = 253_402_300_799_999
Millis = Field(default=None, ge=0, le=MAX_MS, description="ms since 1970-01-01 UTC")


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NamespaceIn(Body):
    namespace: str = Field(min_length=1, max_length=MAX_NAMESPACE_LENGTH)


class TurnIn(Body):
    """One exchange: what the user said and what the agent answered."""

    user_input: str
    assistant_output: str
    source: str = Field(default="USER", min_length=1, max_length=200)
    timestamp: int | None = Millis
    metadata: dict[str, Any] | None = None


class MessageIn(Body):
    role: Literal["user", "assistant", "system"]
    content: str
    id: str | None = Field(default=None, min_length=1, max_length=200)
    timestamp: int | None = Millis
    metadata: dict[str, Any] = Field(default_factory=dict)


class MessagesIn(Body):
    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)
    interaction: int | None = Field(
        default=None, ge=0, le=MAX_MS, description="The time of the interaction (ms)."
    )


class _RecallBase(Body):
    query: str = Field(min_length=1, max_length=10_000)
    k: int = Field(default=10, ge=1, le=MAX_K)
    since: int | None = Millis
    until: int | None = Millis
    dates: bool = True
    topic: str | None = Field(default=None, min_length=1, max_length=400)
    activate: bool = Field(
        default=False,
        description="Put what was found into the namespace's context (needs a write key).",
    )


if TYPE_CHECKING:
    RecallIn = _RecallBase
else:  # the query's own fields, and the filter's as `RecallFilter` declares them
    RecallIn = create_model(
        "RecallIn",
        __base__=_RecallBase,
        **{
            f.name: (
                f.kind,
                Field(
                    default=None,
                    description=f.description,
                    min_length=f.min_length,
                    max_length=f.max_length,
                ),
            )
            for f in filter_fields()
        },
    )


class ForgetMessagesIn(Body):
    message_ids: list[str] = Field(min_length=1, max_length=MAX_MESSAGES)


class FieldProblem(BaseModel):
    field: str = Field(description="Where, dotted: body.k, query.limit, path.namespace.")
    problem: str


class ErrorDetail(BaseModel):
    code: str = Field(
        description="invalid_input, refused, not_found, method_not_allowed, conflict,"
        " too_large, misdirected, unavailable, internal"
    )
    message: str
    fields: list[FieldProblem] | None = None


class ErrorBody(BaseModel):
    """Every error answer."""

    error: ErrorDetail


#: The error answers every /v1 route may give, documented in the schema.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": meaning}
    for status, meaning in [
        (401, "no key, or an unknown or revoked one"),
        (403, "outside the key's namespaces or scope"),
        (404, "unknown namespace, unit or slice"),
        (409, "a conflict with what is stored"),
        (413, "request body too large"),
        (421, "a Host this service does not serve (see --allowed-host)"),
        (422, "a field is missing or invalid (named in `fields`)"),
        (503, "the database cannot be reached"),
    ]
}
