"""What recall returns: the messages it found, where they are, and the slices that hold them."""

from __future__ import annotations

from dataclasses import dataclass

from partner_memory.model import MemorySlice, Message, Record


@dataclass(frozen=True, slots=True)
class RecalledMessage(Record):
    """A message recall found, best first; `unit_id` None: still in the window (not rolled)."""

    message: Message
    unit_id: str | None
    position: int | None
    score: float


@dataclass(frozen=True, slots=True)
class RecalledSlice(Record):
    """A slice whose range holds a recalled message: its summary, and where to read more."""

    unit_id: str
    slice: MemorySlice


#: Only messages of the range were recalled (the caller's since/until, or a query that
#: asks for nothing but a time)...
ONLY = "only"
#: ...or they were preferred (a query's date beside what it asks about).
PREFERRED = "preferred"


@dataclass(frozen=True, slots=True)
class DateRange(Record):
    """The times a recall was bounded to: [start_at, end_at) in ms, either bound None when
    open; `cue` the query's words that named it (None: the caller's since/until)."""

    cue: str | None
    start_at: int | None
    end_at: int | None
    mode: str = ONLY


@dataclass(frozen=True, slots=True)
class TopicCount(Record):
    """A topic path of a namespace and how many slices are filed under it."""

    path: str
    slice_count: int


@dataclass(frozen=True, slots=True)
class TopicMatch(Record):
    """The topic a recall kept to: `path` is the one asked, or its nearest parent holding
    slices; `related` are other topics under the same root, most used first."""

    asked: str
    path: str
    slice_count: int
    related: list[str]


@dataclass(frozen=True, slots=True)
class RecallResult(Record):
    query: str
    hits: list[RecalledMessage]
    slices: list[RecalledSlice]
    #: None: the recall was not bounded in time.
    date_range: DateRange | None = None
    #: None: no topic was asked for.
    topic: TopicMatch | None = None
