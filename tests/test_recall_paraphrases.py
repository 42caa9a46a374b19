"""Recall by meaning alone: a question that shares no word with what was remembered."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from partner_memory import Message, PartnerMemory, open_store
from partner_memory.recall.analyze import terms
from partner_memory.recall.embed import EmbeddingSettings
from tests.helpers import needs_encoder, needs_locomo

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "benchmarks" / "data" / "paraphrases.json"


def _bench() -> Any:
    """benchmarks/bench_paraphrase.py as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location(
        "bench_paraphrase", PAIRS.parent.parent / "bench_paraphrase.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pairs() -> list[tuple[str, str]]:
    return [(said, asked) for said, asked in json.loads(PAIRS.read_text("utf-8"))]


def test_the_suite_pairs_share_no_content_word() -> None:
    """At least 60 pairs, 15 of them Chinese; no pair shares an analysed term (what
    recall matches words by), checked here rather than by eye."""
    pairs = _pairs()
    chinese = [s for s, _ in pairs if re.search(r"[\u4e00-\u9fff]", s)]
    assert len(pairs) >= 60
    assert len(chinese) >= 15
    assert len({s for s, _ in pairs}) == len(pairs)
    for said, asked in pairs:
        assert not set(terms(said)) & set(terms(asked)), (said, asked)


@needs_locomo
def test_the_realistic_layout_says_each_sentence_in_passing() -> None:
    """bench_paraphrase's layout: every sentence once, among at least 200 ordinary
    LoCoMo dev messages over at least 8 sessions."""
    bench = _bench()
    said = [s for s, _ in _pairs()]
    sessions = bench.layout(said, seed=7)
    texts = [m.content for session in sessions for m in session]
    assert len(sessions) >= 8
    assert len(texts) - len(said) >= 200
    assert sorted(t for t in texts if t in set(said)) == sorted(said)
    assert all(m.timestamp is not None for session in sessions for m in session)


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


@needs_locomo
def test_the_realistic_suite_with_the_static_default() -> None:
    """The figure `bench_paraphrase.py` prints for the shipped static model, offline: a
    floor under what it measured in the top five (46 % as recall runs, 19 % if meaning
    never led), so a loss shows."""
    measured = _bench().score(EmbeddingSettings(), 5, 7, (1.0, 0.0))[0]
    for fusion, floor in ((1.0, 0.4), (0.0, 0.15)):
        rates = measured[fusion]
        total = sum(n for _, _, n in rates.values())
        within = sum(hit * n for _, hit, n in rates.values()) / total
        assert within >= floor, (fusion, rates)


@needs_locomo
@needs_encoder
def test_the_realistic_suite_with_the_encoder() -> None:
    """The packaged multilingual encoder: floors under what it measured in the top five
    (as recall runs, English 72 % and Chinese 94 %; if meaning never led, 19 % and 61 %)."""
    measured = _bench().score(EmbeddingSettings.encoder(), 5, 7, (1.0, 0.0))[0]
    assert measured[1.0]["en"][1] >= 0.65, measured
    assert measured[1.0]["zh"][1] >= 0.85, measured
    assert measured[0.0]["en"][1] >= 0.12, measured
    assert measured[0.0]["zh"][1] >= 0.5, measured
