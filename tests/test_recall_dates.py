"""Dates in queries: read relative to the namespace's own time, in English and Chinese;
a query that asks for nothing but a time lists that time, otherwise the time is preferred."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from partner_memory import Message, PartnerMemory
from partner_memory.recall.dates import find_date_cue
from partner_memory.store import MemoryStore

HOUR = 3_600_000


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


NOW = _ms("2023-08-20T12:00:00")  # a Sunday


#: Phrases dateparser misreads, read by rule (`recall.date_phrases`).
PHRASES = [
    # a part of a month, the month named with its year or the latest one so far
    (
        "what happened in the last week of October 2023?",
        "in the last week of October 2023",
        "2023-10-25",
        "2023-11-01",
    ),
    ("the second week of July", "the second week of July", "2023-07-08", "2023-07-15"),
    ("plans for early May", "early May", "2023-05-01", "2023-05-11"),
    ("what did Mei do in late August", "in late August", "2023-08-21", "2023-09-01"),
    ("mid-September", "mid-September", "2022-09-11", "2022-09-21"),
    (
        "the first weekend of October 2023",
        "the first weekend of October 2023",
        "2023-10-07",
        "2023-10-09",
    ),
    # a span measured from the date the question names, not from now
    (
        "what did we do the week before 16 November 2023",
        "the week before 16 November 2023",
        "2023-11-09",
        "2023-11-16",
    ),
    (
        "the day after 3 October 2023",
        "the day after 3 October 2023",
        "2023-10-04",
        "2023-10-05",
    ),
    ("the month before March 2023", "the month before March 2023", "2023-02-01", "2023-03-01"),
    (
        "the weekend of 12 August 2023",
        "the weekend of 12 August 2023",
        "2023-08-12",
        "2023-08-14",
    ),
    ("the week of 16 August 2023", "the week of 16 August 2023", "2023-08-14", "2023-08-21"),
    # seasons: "last" is one that has ended (now is 20 August: this summer has not)
    ("what happened last summer", "last summer", "2022-06-01", "2022-09-01"),
    ("this summer", "this summer", "2023-06-01", "2023-09-01"),
    ("the trip in the summer of 2022", "in the summer of 2022", "2022-06-01", "2022-09-01"),
    ("last winter", "last winter", "2022-12-01", "2023-03-01"),
]


@pytest.mark.parametrize(
    ("query", "cue", "since", "until"),
    [
        ("what happened yesterday", "yesterday", "2023-08-19", "2023-08-20"),
        ("what did we discuss last week", "last week", "2023-08-07", "2023-08-14"),
        ("what did Caroline do in May 2023", "in May 2023", "2023-05-01", "2023-06-01"),
        ("notes of 2023-05-08", "of 2023-05-08", "2023-05-08", "2023-05-09"),
        ("what happened on 8 May 2023", "on 8 May 2023", "2023-05-08", "2023-05-09"),
        ("What did I say 3 days ago", "3 days ago", "2023-08-17", "2023-08-18"),
        ("the hike last May", "May", "2023-05-01", "2023-06-01"),
        ("plans for this month", "this month", "2023-08-01", "2023-09-01"),
        ("did we go hiking in 2022?", "in 2022", "2022-01-01", "2023-01-01"),
        ("上周我们聊了什么", "上周", "2023-08-07", "2023-08-14"),
        ("昨天", "昨天", "2023-08-19", "2023-08-20"),
        ("前天说了什么", "前天", "2023-08-18", "2023-08-19"),
        ("2023年5月8日的会议", "2023年5月8", "2023-05-08", "2023-05-09"),
        *PHRASES,
    ],
)
def test_date_cues_become_the_range_they_name(query: str, cue: str, since: str, until: str) -> None:
    found = find_date_cue(query, NOW)
    assert found is not None
    assert (found.text, found.since, found.until) == (cue, _ms(since), _ms(until))


@pytest.mark.parametrize(
    "query",
    [
        "a summer dress",
        "she likes winter",
        "the week before the party",
        "May I ask about the trip?",
        "we talked about it",
        "When did Melanie paint a sunrise?",
        "how many times did she go",
        "我们聊过猫吗",
    ],
)
def test_words_that_only_look_like_dates_are_not_cues(query: str) -> None:
    assert find_date_cue(query, NOW) is None


def _three_days(memory: PartnerMemory) -> None:
    day = _ms("2023-05-01T09:00:00")
    memory.record_messages(
        [
            Message("user", "We baked sourdough bread together", timestamp=day),
            Message("assistant", "The crust looked perfect", timestamp=day + HOUR),
        ]
    )
    memory.record_messages(
        [
            Message("user", "I repaired the garden fence", timestamp=day + 24 * HOUR),
            Message("assistant", "Did you bake anything after?", timestamp=day + 25 * HOUR),
        ]
    )
    memory.roll_now()
    memory.record_messages(  # the newest, still in the window: "today" is 3 May
        [Message("user", "Bread again, with olives", timestamp=day + 48 * HOUR)]
    )
    memory.wait()


def _texts(memory: PartnerMemory, query: str, **options: object) -> list[str]:
    return [h.message.content for h in memory.recall(query, k=5, **options).hits]  # type: ignore[arg-type]


def test_a_time_alone_lists_what_was_said_then(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _three_days(memory)
        yesterday = ["Did you bake anything after?", "I repaired the garden fence"]  # newest first
        assert _texts(memory, "what happened yesterday") == yesterday
        assert _texts(memory, "昨天发生了什么") == yesterday
        found = memory.recall("what did we talk about on 1 May 2023")
        assert [h.message.content for h in found.hits] == [
            "The crust looked perfect",
            "We baked sourdough bread together",
        ]
        assert found.date_range is not None
        assert found.date_range.to_dict() == {
            "cue": "on 1 May 2023",
            "start_at": _ms("2023-05-01"),
            "end_at": _ms("2023-05-02"),
            "mode": "only",
        }
        assert _texts(memory, "what happened today") == ["Bread again, with olives"]


def test_a_time_beside_a_question_is_preferred_not_required(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _three_days(memory)
        for query, first, other in [
            ("bread on 1 May 2023", "We baked sourdough bread together", "Bread again"),
            ("bread today", "Bread again, with olives", "We baked sourdough bread"),
        ]:
            found = memory.recall(query, k=5)
            texts = [h.message.content for h in found.hits]
            assert texts[0] == first
            assert any(t.startswith(other) for t in texts)  # preferred, not filtered
            assert found.date_range is not None
            assert found.date_range.mode == "preferred"


def test_the_last_week_of_a_month_lists_that_week(store: MemoryStore) -> None:
    """Not the last week before the newest message, which dateparser reads it as."""
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        for day, text in [
            ("2023-10-10", "We planned the garden"),
            ("2023-10-27", "We planted the tulip bulbs"),
            ("2023-11-14", "The first frost came"),
        ]:
            memory.record_messages([Message("user", text, timestamp=_ms(f"{day}T09:00:00"))])
        memory.roll_now()
        memory.record_messages([Message("user", "Snow!", timestamp=_ms("2023-11-20T09:00:00"))])
        memory.wait()
        found = memory.recall("what did we do in the last week of October 2023?")
        assert [h.message.content for h in found.hits] == ["We planted the tulip bulbs"]
        assert found.date_range is not None
        assert found.date_range.mode == "only"


def test_given_bounds_win_and_dates_can_be_off(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _three_days(memory)
        assert memory.recall("bread yesterday", dates=False).date_range is None
        found = memory.recall("bread yesterday", since=_ms("2023-05-03"))
        assert found.date_range is not None
        assert (found.date_range.cue, found.date_range.mode) == (None, "only")
        assert [h.message.content for h in found.hits] == ["Bread again, with olives"]


@pytest.mark.parametrize(
    ("text", "pointed"),
    [
        ("I went to the support group yesterday", ["7 May 2023"]),
        ("We met two days ago, and the day before yesterday too", ["6 May 2023"]),
        ("3 days ago I ran", ["5 May 2023"]),
        ("last week was busy, last month too", ["May 2023", "April 2023"]),
        ("a year ago, last year", ["2022"]),
        ("我们昨天去了北京，上个月去了上海", ["7 May 2023", "April 2023"]),
        ("Nothing relative here, nor in May", []),
    ],
)
def test_a_message_points_to_the_dates_it_names(text: str, pointed: list[str]) -> None:
    from partner_memory.said_dates import pointed_dates

    assert pointed_dates(text, _ms("2023-05-08 10:00")) == pointed
    assert pointed_dates(text, None) == []


def test_the_first_character_lookahead_keeps_every_match() -> None:
    """The pattern of relative dates starts with a lookahead on the characters a match
    can begin with (for speed): it finds what the pattern without it finds, in every
    alternative and case, so a new alternative must extend that set."""
    import re

    from partner_memory import said_dates

    lookahead, _, rest = said_dates._RELATIVE.pattern.partition("(?:")
    assert lookahead.startswith("(?=[")
    plain = re.compile(rest[:-1], re.IGNORECASE)
    numbers = [*said_dates._NUMBERS, "2", "12"]
    phrases = [
        "the day before yesterday",
        "yesterday",
        *(f"last {unit}" for unit in ("night", "week", "weekend", "month", "year")),
        *(f"{n} {unit}{s} ago" for n in numbers for unit in ("day", "week") for s in ("", "s")),
        *said_dates._CHINESE,
    ]
    text = " | ".join(f"x {p}, {p.upper()}, {p.title()}." for p in phrases)
    found = [m.span() for m in said_dates._RELATIVE.finditer(text)]
    assert found == [m.span() for m in plain.finditer(text)]
    assert len(found) >= 3 * len(phrases) - 2 * len(said_dates._CHINESE)


def test_a_message_is_found_under_the_day_it_points_to(store: MemoryStore) -> None:
    """Said on 8 May: "yesterday" is the 7th, so a question about the 7th prefers it."""
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        at = _ms("2023-05-08 18:00")
        memory.record_messages(
            [
                Message("user", "I went to the support group today", timestamp=at),
                Message("assistant", "Good to know", timestamp=at + 1000),
                Message("user", "I went to the support group yesterday", timestamp=at + 2000),
            ]
        )
        memory.roll_now()
        memory.wait()
        found = _texts(memory, "the support group on 7 May 2023", dates=False)
        assert found[0] == "I went to the support group yesterday"
        found = _texts(memory, "the support group on 8 May 2023", dates=False)
        assert found[0] == "I went to the support group today"


@pytest.mark.parametrize(
    ("said", "asked"),
    [
        ("I went to the support group yesterday", "the support group on 7 May 2023"),
        ("I ran a charity race last Saturday", "the charity race on 6 May 2023"),
        ("We move to Lisbon next month", "the move to Lisbon in June 2023"),
    ],
)
def test_a_question_naming_a_date_finds_what_was_said_relative_to_it(
    store: MemoryStore, said: str, asked: str
) -> None:
    """Said on Monday 8 May 2023: "yesterday", "last Saturday" and "next month" name the
    7th, the 6th and June; a question naming that date finds the message first, before
    one that merely shares its words on another day."""
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        at = _ms("2023-05-08 18:00")
        subject = " ".join(said.split()[:5])
        memory.record_messages(
            [
                Message("user", f"{subject} is on my mind", timestamp=at - 40 * 24 * HOUR),
                Message("user", said, timestamp=at),
                Message("assistant", "Good to know", timestamp=at + 1000),
            ]
        )
        memory.roll_now()
        memory.wait()
        found = memory.recall(asked, k=3)
        assert found.hits[0].message.content == said, [h.message.content for h in found.hits]


def test_a_date_alone_lists_the_newest_first_and_a_number_beside_a_day_is_a_word(
    store: MemoryStore,
) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        at = _ms("2023-05-08 09:00")
        memory.record_messages(
            [Message("user", f"today {i}", timestamp=at + i * HOUR) for i in range(5)]
            + [Message("user", f"yesterday {i}", timestamp=at - 24 * HOUR + i) for i in range(2)]
        )
        listed = _texts(memory, "what did I say today")
        assert listed == [f"today {i}" for i in (4, 3, 2, 1, 0)]
        found = memory.recall("today 1", k=3)
        assert found.hits[0].message.content == "today 1"
        assert found.date_range is not None
        assert found.date_range.cue == "today"
        assert found.date_range.mode == "preferred"
