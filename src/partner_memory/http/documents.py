"""The answers' types: the documents of docs/json.md as pydantic models.

They give the OpenAPI schema its response shapes (so clients and schema
fuzzing can check every answer), and FastAPI checks each answer against
them: `extra="forbid"` makes a field a route adds without declaring it here
a failure in the tests rather than a silent drift.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageOut(Doc):
    id: str
    role: Literal["user", "assistant", "system"]
    content: str
    timestamp: int | None
    metadata: dict[str, Any]
    text: str
    speaker: str | None
    markers: list[str]


class WindowMessageOut(MessageOut):
    interaction: int | None


class WindowDoc(Doc):
    namespace: str
    messages: list[WindowMessageOut]


class SliceOut(Doc):
    id: str
    start_index: int
    end_index: int
    summary: str
    timestamp: int
    summarizer: str | None


class UnitOut(Doc):
    id: str
    timestamp: int
    message_count: int
    slice_count: int


class NamespaceOut(Doc):
    namespace: str
    memory_session_id: str
    unit_count: int
    slice_count: int


class ConsumerOut(Doc):
    name: str
    durable: bool
    position: int
    head: int
    failure_count: int
    last_error: str | None
    last_failure_at: int | None


class RollingTotalsOut(Doc):
    rolling_count: int
    message_count: int
    llm_call_count: int
    prompt_tokens: int
    completion_tokens: int
    llm_ms: float
    pipeline_ms: float
    by_summarizer: dict[str, int]
    fallback_count: int
    recent_fallback_reasons: list[str]
    consumers: list[ConsumerOut]


class BlockOut(Doc):
    name: str
    source: str
    urgency: str
    exposure: str
    score: float
    snapshot: str
    history: list[str]


class NamespacesDoc(Doc):
    namespaces: list[NamespaceOut]
    total: int
    limit: int
    next_after: str | None


class StatsDoc(Doc):
    namespace: str
    unit_count: int
    rolling_totals: RollingTotalsOut


class RollingOut(Doc):
    seq: int
    unit_id: str
    slice: SliceOut
    message_count: int
    idle: bool


class RollingsDoc(Doc):
    namespace: str
    rollings: list[RollingOut]


class TurnDoc(Doc):
    namespace: str
    messages: list[MessageOut]
    replied: bool


class MessagesDoc(Doc):
    namespace: str
    messages: list[MessageOut]
    window_length: int


class RollDoc(Doc):
    namespace: str
    rolled: bool
    unit_id: str | None
    slice: SliceOut | None
    unit: UnitOut | None
    increment_messages: list[MessageOut]
    summary: str | None
    rolling_size: int | None
    retain_divisor: int | None
    idle: bool


class SessionDoc(Doc):
    namespace: str
    memory_session_id: str


class ContextDoc(Doc):
    namespace: str
    blocks: list[BlockOut]


class UnitsDoc(Doc):
    namespace: str
    units: list[UnitOut]
    total: int
    offset: int
    limit: int
    next_after: str | None


class UnitDoc(Doc):
    namespace: str
    unit: UnitOut
    slices: list[SliceOut]
    messages: list[MessageOut] | None = None


class SummarySentenceOut(Doc):
    text: str
    positions: list[int]
    supported: bool
    held: float


class SliceDoc(Doc):
    namespace: str
    unit_id: str
    slice: SliceOut
    messages: list[MessageOut]
    provenance: list[SummarySentenceOut]


class HitOut(Doc):
    message: MessageOut
    unit_id: str | None
    position: int | None
    score: float


class HeldSliceOut(Doc):
    unit_id: str
    slice: SliceOut


class DateRangeOut(Doc):
    cue: str | None
    start_at: int | None
    end_at: int | None
    mode: Literal["only", "preferred"]


class TopicMatchOut(Doc):
    asked: str
    path: str
    slice_count: int
    related: list[str]


class RecallDoc(Doc):
    namespace: str
    query: str
    hits: list[HitOut]
    slices: list[HeldSliceOut]
    date_range: DateRangeOut | None
    topic: TopicMatchOut | None


class TopicOut(Doc):
    path: str
    slice_count: int


class TopicsDoc(Doc):
    namespace: str
    topics: list[TopicOut]


class ForgottenDoc(Doc):
    namespace: str
    message_count: int


class UnitForgottenDoc(Doc):
    namespace: str
    unit_id: str


class NamespaceForgottenDoc(Doc):
    namespace: str


class StatusDoc(Doc):
    status: str
