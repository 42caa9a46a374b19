"""What the offline summary keeps: facts over chatter, statements over questions, each
thing once, relative dates as the dates they meant, a length that follows the increment."""

from __future__ import annotations

from datetime import UTC, datetime

from partner_memory.model import Message
from partner_memory.rolling import ExtractiveSummarizer, UsageMeter
from partner_memory.rolling.summarize import CHARS_PER_MESSAGE, MOST_CHARS

MAY_8 = int(datetime(2023, 5, 8, 9, tzinfo=UTC).timestamp() * 1000)


def _said(*texts: str, max_chars: int = 60) -> str:
    messages = [
        Message("user" if i % 2 == 0 else "assistant", text, timestamp=MAY_8)
        for i, text in enumerate(texts)
    ]
    return ExtractiveSummarizer(max_chars).summarize(messages, UsageMeter())


def test_a_sentence_with_names_and_numbers_is_kept_before_chatter() -> None:
    summary = _said(
        "That trip sounds really nice and lovely.",
        "The trip took us to Lisbon in 2022.",
    )
    assert "Lisbon in 2022" in summary
    assert "lovely" not in summary


def test_a_statement_is_kept_before_a_question_with_the_same_words() -> None:
    summary = _said("Did you go hiking near the lake?", "I went hiking near the lake.")
    assert "I went hiking near the lake." in summary
    assert "Did you" not in summary


def test_a_second_sentence_says_something_new() -> None:
    summary = _said(
        "My sister plays the violin in the city orchestra.",
        "My sister plays the violin in the orchestra of the city.",
        "We adopted a small puppy from the shelter.",
        max_chars=135,
    )
    assert "puppy" in summary
    assert summary.count("violin") == 1


def test_a_relative_date_is_said_as_the_date_it_meant() -> None:
    assert "I finished the marathon yesterday (7 May 2023)." in _said(
        "I finished the marathon yesterday.", max_chars=200
    )
    assert "（7 May 2023）" in _said("我昨天跑完了马拉松。", max_chars=200)


def test_a_long_increment_gets_a_longer_summary_up_to_a_bound() -> None:
    topics = ["Lisbon", "Porto", "Madrid", "Seville", "Valencia", "Bilbao", "Granada"]
    lines = [
        f"In {2010 + i % 10} we visited {topics[i % 7]} with Anna number {i}." for i in range(200)
    ]
    short = _said(*lines[:4], max_chars=420)
    longer = _said(*lines[:40], max_chars=420)
    longest = _said(*lines, max_chars=420)
    assert len(short) <= 420 + 40  # the head ("I talked with ...") is not counted
    assert len(longer) > 420
    assert len(longer) <= CHARS_PER_MESSAGE * 40 + 60
    assert MOST_CHARS * 0.8 < len(longest) <= MOST_CHARS + 60
