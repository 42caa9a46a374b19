"""A question that gathers what was said over time ("what books has Tim read?") is
answered from several sessions: one session's further hits give way to the others'.
A question about one thing keeps the engine's order."""

from __future__ import annotations

import pytest

from partner_memory import Message, PartnerMemory
from partner_memory.recall.engine import GATHERING
from partner_memory.store import MemoryStore

START = 1_700_000_000_000
DAY = 86_400_000
#: One session talks of a book at length; two others name one book each, in passing.
SESSIONS = [
    [
        "I read a book on the train, a long book",
        "That book again? You read that book every week",
        "I read a book at lunch too, the same book",
        "Your book habit is a lot",
    ],
    ["We walked to the harbour", "I read a book about whales last night"],
    ["The bakery opened late", "I read a book about ships, then slept"],
]


def _remember(memory: PartnerMemory) -> list[str]:
    units = []
    for day, texts in enumerate(SESSIONS):
        at = START + day * DAY
        memory.record_messages(
            [Message("user", t, timestamp=at + i * 1000) for i, t in enumerate(texts)],
            interaction=at + len(texts) * 1000,
        )
        rolled = memory.roll_now(idle=True)
        assert rolled is not None
        units.append(rolled.memory_unit.id)
    memory.wait()
    return units


@pytest.mark.parametrize(
    ("question", "gathers"),
    [
        ("What books has Tim read?", True),
        ("Where have they camped?", True),
        ("Did Jon and Gina both dance?", True),
        ("How many times has John hurt his ankle?", True),
        ("What book did Tim read?", False),
        ("How long has Melanie been painting?", False),
        ("How does Gina describe the studio that Jon has opened?", False),
        ("Where is the harbour?", False),
    ],
)
def test_which_questions_gather(question: str, gathers: bool) -> None:
    assert (GATHERING.search(question) is not None) is gathers


def test_a_gathering_question_is_answered_from_several_sessions(store: MemoryStore) -> None:
    with PartnerMemory(store, "tim", idle_timer=False) as memory:
        units = _remember(memory)
        one = memory.recall("Which book did I read?", k=4).hits
        gathered = memory.recall("Which books have I read?", k=4).hits
    # the same words: asked about one book, the session that talks of books most has
    # the best four; asked what has been read, the others come in among them
    assert {h.unit_id for h in one} == {units[0]}
    assert gathered[0].unit_id == units[0]
    assert {h.unit_id for h in gathered} == set(units)
    assert gathered[0].message == one[0].message
