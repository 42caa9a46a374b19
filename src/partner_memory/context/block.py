"""R21: a context block - one content in three renderings, with an activation score.

The score starts at 100 and moves: it fades with time and when a newer block
from the same source replaces it, and rises when a resolve exposes it. The
score picks the rendering: full at 70 and above, compact from 30, abstract
below; at 0 the block is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from partner_memory.errors import InvalidInputError

INITIAL_SCORE = 100.0
FULL_AT = 70.0
COMPACT_AT = 30.0
#: "Just below" a level threshold, for the R23 activation ceilings.
BELOW = 1e-6


class Domain(StrEnum):
    ACTION = "ACTION"
    MEMORY = "MEMORY"
    PERCEIVE = "PERCEIVE"
    COGNITION = "COGNITION"
    COMMUNICATION = "COMMUNICATION"


#: The domains an agent's context is read in when none are named: talk, then memory.
DEFAULT_DOMAINS = (Domain.COMMUNICATION, Domain.MEMORY)


class Urgency(StrEnum):
    LOW = "LOW"
    NORMAL = "NORMAL"
    HIGH = "HIGH"
    CRITICAL = "CRITICAL"


class Level(StrEnum):
    FULL = "full"
    COMPACT = "compact"
    ABSTRACT = "abstract"


class Exposure(StrEnum):
    PRIMARY = "PRIMARY"
    SECONDARY = "SECONDARY"


def level_of(score: float) -> Level:
    if score < COMPACT_AT:
        return Level.ABSTRACT
    if score < FULL_AT:
        return Level.COMPACT
    return Level.FULL


@dataclass(eq=False)
class ContextBlock:
    """A block of context; `compact` defaults to `full`, `abstract` to `compact`."""

    name: str
    source: str
    full: str
    domains: frozenset[Domain]
    compact: str | None = None
    abstract: str | None = None
    replace_fade: float = 0.0
    time_fade_per_minute: float = 0.0
    activate: float = 0.0
    urgency: Urgency = Urgency.NORMAL
    score: float = INITIAL_SCORE
    #: When the score last took time into account (ms); set by the workspace.
    touched_at: int = 0
    #: When the block was made (ms): between equal scores the newer block wins.
    made_at: int = 0

    def __post_init__(self) -> None:
        if not self.name or not self.source:
            raise InvalidInputError("a context block needs a name and a source")
        if not self.domains:
            raise InvalidInputError(f"context block {self.name!r} focuses on no domain")
        self.domains = frozenset(Domain(d) for d in self.domains)
        for label in ("replace_fade", "time_fade_per_minute", "activate"):
            if getattr(self, label) < 0:
                raise InvalidInputError(f"context block {label} must not be negative")

    @property
    def source_key(self) -> tuple[str, str]:
        return (self.name, self.source)

    @property
    def level(self) -> Level:
        return level_of(self.score)

    def rendering(self, level: Level) -> str:
        compact = self.full if self.compact is None else self.compact
        if level is Level.FULL:
            return self.full
        if level is Level.COMPACT:
            return compact
        return compact if self.abstract is None else self.abstract
