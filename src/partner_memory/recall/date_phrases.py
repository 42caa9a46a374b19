"""Date phrases dateparser misreads, read by rule: a part of a month, a span before or after
a named date, a season.

dateparser reads "the last week of October 2023" as the week before the
question's own time, "the week before 16 November 2023" as the 16th of the
current month and "early May" as a day; these rules come first, and read
the date they name (its own anchor) where the phrase names one, else the
latest such time not after the question's. Weeks start on Monday; seasons
are the northern hemisphere's meteorological ones (spring is March to May).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta

_MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = r"(?P<month>" + "|".join(n[:3] + r"(?:" + n[3:] + r")?" for n in _MONTH_NAMES) + r")\.?"
_YEAR = r"(?:,?\s+(?P<year>(?:19|20)\d\d))?"
_ORDINAL = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3}
_PART_OF_MONTH = re.compile(
    rf"\b(?:(?:in|during)\s+)?(?:the\s+)?(?P<which>first|1st|second|2nd|third|3rd|fourth|last)"
    rf"\s+(?P<unit>week|weekend|days?)\s+(?:of|in)\s+{_MONTH}{_YEAR}\b",
    re.IGNORECASE,
)
_EARLY_LATE = re.compile(
    rf"\b(?:(?:in|during)\s+)?(?P<part>early|mid|middle of|late|the end of|end of|"
    rf"the beginning of|beginning of|the start of|start of)[\s-]+{_MONTH}{_YEAR}\b",
    re.IGNORECASE,
)
_SPAN_AROUND = re.compile(
    r"\b(?:(?:in|during)\s+)?(?:the\s+)?(?P<span>day|week|weekend|month)\s+"
    r"(?P<side>before|after|of)\s+(?P<anchor>.+?)(?=[?.!,;]|$)",
    re.IGNORECASE,
)
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_SEASON = re.compile(
    r"\b(?:(?:in|during)\s+)?(?:(?P<rel>last|this|past|previous)\s+)?(?:the\s+)?"
    r"(?P<season>spring|summer|autumn|fall|winter)(?:\s+(?:of\s+)?(?P<year>(?:19|20)\d\d))?\b",
    re.IGNORECASE,
)

Span = tuple[str, datetime, datetime]


Reader = Callable[[str], datetime | None]


def read_phrase(query: str, now: datetime, read_date: Reader) -> Span | None:
    """The first phrase of `query` these rules read, with its range (naive UTC); `read_date`
    reads the date a span is measured from ("16 November 2023")."""
    found: list[tuple[int, Span]] = []
    for rule in (_part_of_month, _early_late, _span_around, _season):
        span = rule(query, now, read_date)
        if span is not None:
            found.append((query.lower().find(span[0].lower()), span))
    return min(found, key=lambda f: f[0])[1] if found else None


def _month_start(match: re.Match[str], now: datetime) -> datetime:
    named = match["month"].lower()[:3]
    month = next(i for i, n in enumerate(_MONTH_NAMES, 1) if n.startswith(named))
    if match["year"]:
        return datetime(int(match["year"]), month, 1)
    year = now.year if month <= now.month else now.year - 1  # the latest such month
    return datetime(year, month, 1)


def next_month(start: datetime) -> datetime:
    """The first day of the month after `start`'s."""
    return (start + timedelta(days=32)).replace(day=1)


def _part_of_month(query: str, now: datetime, read_date: Reader) -> Span | None:
    match = _PART_OF_MONTH.search(query)
    if match is None:
        return None
    start = _month_start(match, now)
    end = next_month(start)
    which, text = match["which"].lower(), match[0].strip()
    if match["unit"].lower() == "weekend":  # Saturday and Sunday
        if which == "last":
            saturday = end - timedelta(days=1)
            saturday -= timedelta(days=(saturday.weekday() - 5) % 7)
        else:
            saturday = start + timedelta(days=(5 - start.weekday()) % 7 + 7 * _ORDINAL[which])
        return text, saturday, saturday + timedelta(days=2)
    if which == "last":
        return text, max(start, end - timedelta(days=7)), end
    first = start + timedelta(days=7 * _ORDINAL[which])
    return text, first, min(end, first + timedelta(days=7))


def _early_late(query: str, now: datetime, read_date: Reader) -> Span | None:
    match = _EARLY_LATE.search(query)
    if match is None:
        return None
    start = _month_start(match, now)
    end = next_month(start)
    part = match["part"].lower()
    if part in ("early", "beginning of", "the beginning of", "start of", "the start of"):
        return match[0].strip(), start, start + timedelta(days=10)
    if part in ("mid", "middle of"):
        return match[0].strip(), start + timedelta(days=10), start + timedelta(days=20)
    return match[0].strip(), start + timedelta(days=20), end


def _span_around(query: str, now: datetime, read_date: Reader) -> Span | None:
    match = _SPAN_AROUND.search(query)
    if match is None:
        return None
    anchor = read_date(match["anchor"])
    if anchor is None:
        return None
    day = anchor.replace(hour=0, minute=0, second=0, microsecond=0)
    span, side = match["span"].lower(), match["side"].lower()
    length = {"day": 1, "week": 7, "weekend": 2, "month": 0}[span]
    if span == "month":
        start = day.replace(day=1)
        if side == "before":
            return match[0].strip(), (start - timedelta(days=1)).replace(day=1), start
        if side == "after":
            following = next_month(start)
            return match[0].strip(), following, next_month(following)
        return match[0].strip(), start, next_month(start)
    if side == "of":  # the week (or weekend) holding the date
        monday = day - timedelta(days=day.weekday())
        if span == "weekend":
            return match[0].strip(), monday + timedelta(days=5), monday + timedelta(days=7)
        return match[0].strip(), monday, monday + timedelta(days=length)
    if side == "before":
        return match[0].strip(), day - timedelta(days=length), day
    return match[0].strip(), day + timedelta(days=1), day + timedelta(days=1 + length)


def _season(query: str, now: datetime, read_date: Reader) -> Span | None:
    match = _SEASON.search(query)
    if match is None or not (match["rel"] or match["year"]):
        return None  # "summer" alone is a word ("summer dress"), not a time
    first = _SEASONS[match["season"].lower()]
    if match["year"]:
        start = datetime(int(match["year"]), first, 1)
    else:
        start = datetime(now.year, first, 1)
        if start > now:  # not begun yet this year: last year's
            start = datetime(now.year - 1, first, 1)
        end = _after_season(start)
        if match["rel"].lower() != "this" and end > now:  # "last": one that has ended
            start = datetime(start.year - 1, first, 1)
    return match[0].strip(), start, _after_season(start)


def _after_season(start: datetime) -> datetime:
    end = start
    for _ in range(3):
        end = next_month(end)
    return end
