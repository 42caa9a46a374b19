"""The dates a message points to ("yesterday", "two days ago", "last week", "上周"), as
the date words a question about them uses.

A message is indexed under the day it was said ("8 may 2023"); one that says
"I went to the group yesterday" is about the 7th, so it is indexed under that
day too, and "last month" under the month before. Read by rule, relative to
the message's own time (UTC, like the index's date words): dateparser costs
milliseconds a call, too much for every message of a reindex, and a message
without one of these words costs one regular-expression search.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_NUMBERS = {
    "one": 1, "a": 1, "an": 1, "two": 2, "couple of": 2, "three": 3, "few": 3, "four": 4,
    "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}  # fmt: skip
_COUNT = r"(\d{1,2}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
_CHINESE = {
    "前天": ("day", 2),
    "昨天": ("day", 1),
    "昨晚": ("day", 1),
    "上周": ("week", 1),
    "上週": ("week", 1),
    "上个月": ("month", 1),
    "上個月": ("month", 1),
    "去年": ("year", 1),
}
#: The characters a match can begin with: a lookahead on them lets the matcher pass
#: over every other position at once instead of trying each alternative there (twice
#: as fast on LoCoMo's messages, the same matches).
_FIRST = "".join(sorted({"t", "y", "l", *(w[0] for w in _NUMBERS), *(w[0] for w in _CHINESE)}))
_RELATIVE = re.compile(
    rf"(?=[\d{_FIRST}])"
    rf"(?:\bthe day before yesterday\b|\byesterday\b|\blast (?:night|week(?:end)?|month|year)\b"
    rf"|\b{_COUNT} (day|week|month|year)s? ago\b|前天|昨天|昨晚|上周|上週|上个月|上個月|去年)",
    re.IGNORECASE,
)
#: Most dates one message adds (a list of "two days ago, last week, ..." adds no more).
MOST = 3
#: What any match of `_RELATIVE` contains (lower-cased): most messages hold none of them,
#: and looking for these is many times cheaper than running the pattern over the text.
_ASCII_CUES = ("yesterday", "last ", " ago")
_CUES = (*_ASCII_CUES, *_CHINESE)


def pointed_dates(text: str, at_ms: int | None) -> list[str]:
    """The day ("7 may 2023"), month ("april 2023") or year ("2022") each relative
    date of `text` names, as text for the analyser; [] when it names none."""
    if at_ms is None:
        return []
    cues = _ASCII_CUES if text.isascii() else _CUES
    if not any(map(text.lower().__contains__, cues)):
        return []
    said = datetime.fromtimestamp(at_ms / 1000, tz=UTC)
    found: list[str] = []
    for match in _RELATIVE.finditer(text):
        unit, count = _read(match)
        named = _named(said, unit, count)
        if named not in found:
            found.append(named)
        if len(found) == MOST:
            break
    return found


def _read(match: re.Match[str]) -> tuple[str, int]:
    phrase = match.group(0).lower()
    if phrase in _CHINESE:
        return _CHINESE[phrase]
    if phrase == "the day before yesterday":
        return "day", 2
    if phrase in ("yesterday", "last night"):
        return "day", 1
    if phrase.startswith("last "):
        unit = phrase.split()[1]
        return ("week" if unit == "weekend" else unit), 1
    number, unit = match.group(1).lower(), match.group(2).lower()
    return unit, int(number) if number.isdigit() else _NUMBERS[number]


def _named(said: datetime, unit: str, count: int) -> str:
    if unit == "day":
        return (said - timedelta(days=count)).strftime("%-d %B %Y")
    if unit == "week":  # the words of the days of that week would be seven dates: its month
        return (said - timedelta(weeks=count)).strftime("%B %Y")
    if unit == "month":
        year, month = said.year, said.month - count
        while month < 1:
            year, month = year - 1, month + 12
        return datetime(year, month, 1, tzinfo=UTC).strftime("%B %Y")
    return str(said.year - count)
