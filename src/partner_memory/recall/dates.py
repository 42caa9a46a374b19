"""Date cues in a query ("yesterday", "last May", "2023-05-08", "上周") as a time range.

dateparser finds and reads the expression, in English and Chinese, relative
to the namespace's own time (its newest message: a replayed conversation of
2023 asks "yesterday" about 2023), and says how precise it is; the range is
the whole day, week (Monday first), month or year the expression names, in
UTC like the index's date words. dateparser also reads ordinary words as
dates ("we" as Wednesday, "May I ask"), so a cue must look like one: a
number, a relative word, a full month or weekday name ("may" only next to
"in", "last", a number...), or a Chinese date word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from partner_memory.recall.date_phrases import next_month, read_phrase

_MONTHS = "january february march april june july august september october november december"
_DAYS = "monday tuesday wednesday thursday friday saturday sunday"
_RELATIVE = "yesterday today tonight ago last past previous this next week weekend month year"
_WORDS = "|".join((_MONTHS + " " + _DAYS + " " + _RELATIVE).split())
#: What makes a span a date rather than a word that dateparser can also read as one.
_CUE = re.compile(
    rf"\d|\b(?:{_WORDS})\b|[昨今前明去上本这這下][天日周週年月]|星期|礼拜|[天周月年日号]前?",
    re.IGNORECASE,
)
#: "May" is a month only beside what dates come with.
_MAY = re.compile(
    r"\b(?:in|on|of|since|during|early|late|mid|last|this|next|until|before|after)\s+may\b"
    r"|\bmay\s+\d",
    re.IGNORECASE,
)
#: Anything that could start a cue: queries without one skip dateparser entirely.
_MAYBE = re.compile(rf"{_CUE.pattern}|\bmay\b", re.IGNORECASE)
_LANGUAGES = ["en", "zh"]
#: Words dateparser takes in with a date that do not belong to it ("about on 1 May").
_FILLER = re.compile(r"^(?:(?:about|around|roughly|approximately)\s+)+", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class DateCue:
    """The words of the query that name a time, and the range they mean (ms, UTC)."""

    text: str
    since: int
    until: int


def find_date_cue(query: str, now_ms: int) -> DateCue | None:
    """The first date expression of `query`, read relative to `now_ms`; None if none."""
    if not _MAYBE.search(query):
        return None
    from dateparser.search import search_dates

    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC).replace(tzinfo=None)
    phrase = read_phrase(query, now, lambda text: _parser(now).get_date_data(text).date_obj)
    if phrase is not None:
        text, since, until = phrase
        return DateCue(_FILLER.sub("", text), _ms(since), _ms(until))
    settings = _settings(now)
    found = search_dates(query, languages=_LANGUAGES, settings=settings) or []
    for text, moment in found:
        if not _plausible(text, query):
            continue
        cue = _DAY_AND_NUMBER.sub(r"\1", text.strip())  # "today 1": the 1 is a word
        period = _parser(now).get_date_data(cue).period or "day"
        since, until = _bounds(moment, period)
        return DateCue(_FILLER.sub("", cue), _ms(since), _ms(until))
    return None


#: A day word that dateparser read together with a number after it ("today 1").
_DAY_AND_NUMBER = re.compile(r"^(.*\b(?:today|yesterday|tomorrow|tonight))\s+\d+$", re.IGNORECASE)


def _plausible(text: str, query: str) -> bool:
    if re.fullmatch(r"\W*(?:in|on|of)?\s*may\W*", text, re.IGNORECASE):
        return bool(_MAY.search(query))
    return bool(_CUE.search(text))


def _settings(now: datetime) -> dict[str, Any]:
    return {
        "RELATIVE_BASE": now,
        "PREFER_DATES_FROM": "past",
        "RETURN_AS_TIMEZONE_AWARE": False,
        "TIMEZONE": "UTC",
    }


def _parser(now: datetime) -> Any:
    return _parser_for(now.replace(microsecond=0))


@cache
def _parser_for(now: datetime) -> Any:
    from dateparser.date import DateDataParser

    return DateDataParser(languages=_LANGUAGES, settings=_settings(now))


def _bounds(moment: datetime, period: str) -> tuple[datetime, datetime]:
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "year":
        start = day.replace(month=1, day=1)
        return start, start.replace(year=start.year + 1)
    if period == "month":
        start = day.replace(day=1)
        return start, next_month(start)
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    return day, day + timedelta(days=1)


def _ms(moment: datetime) -> int:
    return int(moment.replace(tzinfo=UTC).timestamp() * 1000)
