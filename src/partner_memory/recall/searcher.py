"""What recall asks of a search engine: one namespace's messages, searched by words.

`RecallEngine` keeps the rules (which analysis, which dates, which topic, the
window) and hands the engine `Doc`s to keep and a `Search` to answer; the
engine returns `Hit`s naming messages by (unit id, position). The window's
messages (not rolled yet) are never stored: a search is given them and
scores them as if they were indexed, under the unit id None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from partner_memory.recall.filters import RecallFilter

#: A message's place: (unit id, position); the window's messages have unit id None.
Place = tuple[str | None, int]


@dataclass(frozen=True, slots=True)
class Doc:
    """One message as the index sees it."""

    unit: str | None
    position: int
    terms: Sequence[str]
    speaker: str | None = None
    timestamp: int | None = None
    #: Its meaning as signed bytes (`recall.embed.pack`), if an embedder made one.
    vector: bytes | None = None
    role: str | None = None
    #: Its metadata as filter terms (`recall.filters.metadata_tags`).
    tags: Sequence[str] = ()
    #: Whether it only asks (`RecallRow.asks`).
    asks: bool = False

    @property
    def place(self) -> Place:
        return (self.unit, self.position)


@dataclass(frozen=True, slots=True)
class Hit:
    place: Place
    score: float


@dataclass(frozen=True, slots=True)
class Search:
    """One question to the engine. Only messages that share a term with `terms` (or
    sit beside one, or mean it) are found, unless `fill` asks for the rest of
    [since, until), or of `within`, in time order ("what happened yesterday")."""

    terms: Sequence[str]
    k: int = 10
    #: The participant the question names: that participant's messages count more.
    speaker: str | None = None
    #: Only messages said in [since, until).
    since: int | None = None
    until: int | None = None
    #: Messages said in this range count more (a preference, not a filter).
    prefer: tuple[int | None, int | None] | None = None
    #: The terms that named `prefer`'s date ("today", "may", "2023"): the date answers
    #: them, so whether the words hold the question leaves them out
    #: (`TantivyIndex._words_hold`).
    dated: frozenset[str] = frozenset()
    #: The question's meaning, from the embedder that made the messages' vectors.
    vector: np.ndarray | None = None
    #: How far the nearest by meaning (`ranking.lead`) are raised: times the best
    #: score of the rest (`ranking.raised`; 1: they lead, 0: meaning only rescores),
    #: when the words hold little of the question and meaning found something nearer
    #: than they did (`TantivyIndex._with_meaning`; `RecallEngine`'s `fusion`).
    fusion: float = 0.0
    #: Once meaning leads, its whole lead comes first (`ranking.LEAD`, nearest first),
    #: not only those nearer than every one of the words' best: for embedders that read
    #: a sentence's meaning (an encoder, an endpoint), not averaged word vectors.
    lead_all: bool = False
    fill: bool = False
    #: The fill in time order newest first (a date asked for alone), else oldest first
    #: (a topic's story).
    newest_first: bool = False
    #: Only messages of these (unit id, start, end) ranges (a topic's slices).
    within: Sequence[tuple[str, int, int]] | None = None
    #: The window's messages, searched with the stored ones.
    window: Sequence[Doc] = field(default=())
    #: Only messages of this role, speaker, unit and metadata.
    where: RecallFilter | None = None
    #: The question gathers what was said over time ("what books has Tim read?"): a
    #: session's further hits give way to other sessions' (`Scoring.spread`).
    spread: bool = False

    def admits(self, doc: Doc) -> bool:
        """Whether the bounds and the filter keep `doc` (a window message, or one stored)."""
        if self.bounded and (doc.timestamp is None or not _inside(doc.timestamp, self)):
            return False
        where = self.where
        return where is None or where.admits(doc.role, doc.speaker, doc.unit, doc.tags)

    @property
    def bounded(self) -> bool:
        return self.since is not None or self.until is not None


def _inside(time: int, search: Search) -> bool:
    return (search.since is None or time >= search.since) and (
        search.until is None or time < search.until
    )


class Searcher(Protocol):
    """One namespace's index, as of its last update."""

    @property
    def newest(self) -> int | None:
        """The time of the newest stored message (None: none has one)."""
        ...

    @property
    def speakers(self) -> list[str]:
        """The participants of the stored messages, lower-cased."""
        ...

    def search(self, search: Search) -> list[Hit]:
        """The `search.k` best messages, best first."""
        ...
