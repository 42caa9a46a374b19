"""Where each sentence of a slice's summary came from: the messages of its range that say
what it says.

Derived, not stored: it is read from the summary and the messages the slice
covers whenever it is asked for, so a forget (which summarises a slice again
from what remains), a copy, a dump or a round trip through the Partner files
can never leave it pointing at a message that is gone, and there is nothing
to migrate. An extractive summary's sentences are its messages' own: each is
found whole in one. Any other summary (an LLM's) is checked word by word: the
messages holding most of a sentence's words (up to `MOST_SOURCES`) are its
sources, and it is `supported` when they hold at least `SUPPORTED` of its
words and every number it says. A sentence nothing supports is kept and
flagged: a summary that "remembers" what was never said shows where.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

from partner_memory import markers as r11
from partner_memory.model import MemorySlice, Message, Record
from partner_memory.said_dates import pointed_dates

if TYPE_CHECKING:
    import Stemmer

#: The share of a sentence's words its sources must hold for it to be supported.
SUPPORTED = 0.5
#: The most messages one sentence is traced to.
MOST_SOURCES = 3

#: How the offline summariser opens a summary ("I talked with Mei and Tom: ").
_FRAME = re.compile(
    r"^(?:I talked with [^:\n]{1,300}: |My notes: |我和.{1,100}?的对话：|我的记录：)"
)
#: Where a summary's sentences end: Latin marks before a space, CJK marks anywhere.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；;])")
#: A speaker before the sentence ("Mei: ...", "小林：...").
_SPEAKER = re.compile(r"^[^:：\n]{1,60}[:：]\s*")
#: The dates the offline summariser writes after a relative one ("yesterday (7 May 2023)").
_ADDED_DATE = re.compile(r" ?[(（][^()（）]{1,60}[)）]")
_LATIN = re.compile(r"[a-z0-9]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
#: Words that carry no claim, or only narrate one ("she told me", "we talked about").
_EMPTY = frozenset(
    """a an the and or but if of to in on at for with from by as is are was were be been being
    i you he she it we they me him her us them my your his its our their this that these those
    do does did have has had not no so just very really too also then than there here what when
    where who how why which would could should will can might must shall about into over after
    before some any all more most other such only own same both each few up out again once
    talk talked told tell tells said say says mention mentioned share shared ask asked
    note noted discuss discussed explain explained agent user assistant""".split()
)


@dataclass(frozen=True, slots=True)
class SummarySentence(Record):
    """One sentence of a summary and the messages it came from."""

    text: str
    #: The unit positions of its source messages, inside the slice's range, in order.
    positions: tuple[int, ...]
    #: Whether its sources hold at least `SUPPORTED` of its words and all its numbers.
    supported: bool
    #: The share of its words its sources hold (1.0: all of them).
    held: float


@dataclass(frozen=True, slots=True)
class SliceReading(Record):
    """A slice, the original messages it covers, and where each sentence of its summary
    came from (`provenance`)."""

    json_keys: ClassVar[Mapping[str, str]] = {"memory_slice": "slice"}

    namespace: str
    unit_id: str
    memory_slice: MemorySlice
    messages: tuple[Message, ...]
    provenance: tuple[SummarySentence, ...]


def provenance(memory_slice: MemorySlice, messages: Sequence[Message]) -> list[SummarySentence]:
    """Each sentence of `memory_slice`'s summary with its sources among `messages`, the
    slice's own (positions `start_index` onwards)."""
    start = memory_slice.start_index
    bodies = [r11.parse(m.content).body for m in messages]
    said = [_message_words(m, body) for m, body in zip(messages, bodies, strict=True)]
    found = []
    for sentence in _sentences(_FRAME.sub("", memory_slice.summary)):
        # the summariser may end a sentence its message left open, or drop a mark
        claim = _ADDED_DATE.sub("", _SPEAKER.sub("", sentence)).rstrip(".。；;")
        whole = next((i for i, body in enumerate(bodies) if claim and claim in body), None)
        words = _words(sentence)
        chosen = [whole] if whole is not None else _sources(words, said)
        held_words = set().union(*(said[i] for i in chosen)) if chosen else set()
        # a sentence found whole in a message is its own words (the dates the offline
        # summariser added are read from the message's time, which an import may lack)
        held = 1.0 if whole is not None or not words else len(words & held_words) / len(words)
        numbers = {w for w in words if w.isdigit()}
        supported = whole is not None or (held >= SUPPORTED and numbers <= held_words)
        positions = tuple(start + i for i in sorted(chosen))
        found.append(SummarySentence(sentence, positions, supported, round(held, 3)))
    return found


def _sentences(summary: str) -> list[str]:
    return [s for s in map(str.strip, _SENTENCE_END.split(summary)) if s]


def _sources(words: set[str], said: Sequence[set[str]]) -> list[int]:
    """The messages that hold most of `words`, each adding some the others do not (greedy
    cover, at most `MOST_SOURCES`; the earliest on a tie)."""
    chosen: list[int] = []
    left = set(words)
    while left and len(chosen) < MOST_SOURCES:
        best = max(range(len(said)), key=lambda i: (len(left & said[i]), -i), default=None)
        if best is None or not left & said[best]:
            break
        chosen.append(best)
        left -= said[best]
    return chosen


def _message_words(message: Message, body: str) -> set[str]:
    """What a message says, with who said it and the days it was said and points to."""
    words = _words(body) | _words(message.speaker or "")
    if message.timestamp is not None:
        day = datetime.fromtimestamp(message.timestamp / 1000, tz=UTC)
        words |= _words(f"{day.day} {day:%B %Y}")
        for pointed in pointed_dates(body, message.timestamp):
            words |= _words(pointed)
    return words


def _words(text: str) -> set[str]:
    """Content words: Latin ones stemmed, numbers without leading zeros, Chinese as pairs
    of characters (a word of two is the commonest)."""
    stem = _stemmer().stemWord
    found = set()
    for token in _LATIN.findall(text.lower()):
        if token.isdigit():
            found.add(str(int(token)))
        elif token not in _EMPTY and len(token) > 1:
            found.add(stem(token))
    for run in _CJK.findall(text):
        found.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return found


@functools.cache
def _stemmer() -> Stemmer.Stemmer:
    import Stemmer

    return Stemmer.Stemmer("english")
