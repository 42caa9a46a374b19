"""Recall by meaning alone: a question that shares no word with what was remembered."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from partner_memory import Message, PartnerMemory, open_store
from partner_memory.recall.analyze import terms

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "benchmarks" / "data" / "paraphrases.json"


def _pairs() -> list[tuple[str, str]]:
    return [(said, asked) for said, asked in json.loads(PAIRS.read_text("utf-8"))]


def test_the_suite_pairs_share_no_content_word() -> None:
    pairs = _pairs()
    assert len(pairs) >= 50
    for said, asked in pairs:
        assert not set(terms(said)) & set(terms(asked)), (said, asked)


@pytest.mark.parametrize("rolled", [False, True], ids=["window", "stored"])
def test_a_clear_paraphrase_is_found_first(rolled: bool) -> None:
    with PartnerMemory(open_store("memory://"), "fresh", idle_timer=False) as memory:
        memory.record_turn("I'm off to Kyoto in April.", "Book early!")
        memory.record_turn("My cat Luna hates the vacuum cleaner.", "Poor Luna.")
        memory.record_turn("The quarterly report is due on Friday.", "I'll remind you.")
        if rolled:
            memory.roll_now()
            memory.wait()
        for question, said in (
            ("where am I travelling?", "Kyoto"),
            ("which animal dislikes cleaning?", "vacuum"),
        ):
            hits = memory.recall(question, k=5, activate=False).hits
            assert hits, question
            assert said in hits[0].message.content, (question, hits[0].message.content)
            assert (hits[0].unit_id is not None) is rolled
        near = memory.recall("travel plans", k=5, activate=False).hits  # "Book early!" too
        assert any("Kyoto" in h.message.content for h in near[:2])


def test_words_still_come_first_when_they_are_shared() -> None:
    """A message that says the question's words outranks one that only means them."""
    with PartnerMemory(open_store("memory://"), "fresh", idle_timer=False) as memory:
        memory.record_messages(
            [
                Message("user", "I'm off to Kyoto in April."),
                Message("user", "The travel insurance form is on my desk."),
            ]
        )
        hits = memory.recall("travel", k=2, activate=False).hits
        assert "insurance" in hits[0].message.content
        assert "Kyoto" in hits[1].message.content


def test_the_suite_finds_most_paraphrases_in_the_top_five() -> None:
    """The shipped static model, offline: the figure `bench_paraphrase.py` prints."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from bench_paraphrase import hit_rate
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    at_1, at_5 = hit_rate(5, rolled=True, embeddings=None)
    assert at_5 >= 0.55, (at_1, at_5)
    assert at_1 >= 0.35, (at_1, at_5)
