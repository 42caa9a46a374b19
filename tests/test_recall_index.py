"""The recall scorer on its own: neighbours, units, speakers, time, the window, and quality."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from partner_memory.ingest import read_transcript
from partner_memory.recall.analyze import date_terms, terms
from partner_memory.recall.index import Doc, RecallIndex

ROOT = Path(__file__).parent.parent
LOCOMO = Path(
    os.environ.get("PARTNER_MEMORY_LOCOMO_DIR", ROOT.parent / "shared" / "data" / "locomo-dev")
)


def docs(unit: str, texts: list[str], speaker: str | None = None, start: int = 0) -> list[Doc]:
    return [
        Doc((unit, i), unit, i, terms(text), speaker, start + i * 1000)
        for i, text in enumerate(texts)
    ]


def keys(index: RecallIndex, query: str, **options: object) -> list[object]:
    return [hit.key for hit in index.search(terms(query), **options)]  # type: ignore[arg-type]


def test_terms_are_stemmed_without_stop_words_and_chinese_is_segmented() -> None:
    assert terms("I went hiking; the hikes were long") == ["went", "hike", "hike", "long"]
    assert terms("上周我们去北京爬山") == ["上周", "去", "北京", "爬山"]
    assert date_terms(1_683_552_960_000) == ["8", "may", "2023"]


def test_a_message_is_found_by_its_neighbours_words_below_its_own() -> None:
    index = RecallIndex()
    index.add(docs("u1", ["we booked the flight", "great, when?", "next friday", "ok", "ok"]))
    index.add(docs("u2", ["the weather is nice", "indeed"]))
    found = keys(index, "flight")
    assert found[0] == ("u1", 0)  # the message that says it
    assert set(found) == {("u1", 0), ("u1", 1), ("u1", 2)}  # and the two after it
    assert ("u1", 3) not in found  # three away: not a neighbour


def test_units_of_the_query_rank_their_messages_up() -> None:
    index = RecallIndex()
    index.add(docs("trip", ["paris in spring", "the louvre", "paris museums", "x", "y", "z"]))
    index.add(docs("other", ["a museum in rome", "x", "y", "z", "w", "v"]))
    first = keys(index, "paris museum")
    assert first[0][0] == "trip"  # type: ignore[index]
    assert first.index(("trip", 2)) < first.index(("other", 0))


def test_the_named_participant_counts_double() -> None:
    index = RecallIndex()
    index.add(docs("u1", ["I love painting sunsets"], speaker="Melanie"))
    index.add(docs("u2", ["painting sunsets is fun"], speaker="Caroline"))
    query = "What does Melanie like painting?"
    assert index.named_speaker(query) == "melanie"
    assert index.named_speaker("What do Melanie and Caroline paint?") is None
    assert keys(index, query, speaker=index.named_speaker(query))[0] == ("u1", 0)


def test_time_range_and_k() -> None:
    index = RecallIndex()
    index.add(docs("u1", ["coffee"] * 10, start=1_000_000))
    within = keys(index, "coffee", since=1_003_000, until=1_006_000, k=10)
    assert sorted(within) == [("u1", i) for i in (3, 4, 5)]
    assert len(keys(index, "coffee", k=4)) == 4
    assert keys(index, "tea") == []
    assert RecallIndex().search(["coffee"]) == []


def test_the_window_is_searched_and_then_left_out_exactly() -> None:
    index = RecallIndex()
    index.add(docs("u1", ["the cat sleeps", "the dog barks", "a bird sings"]))
    before = index.search(terms("cat dog bird fish"), k=10)
    with index.including(docs("window", ["a fish swims", "the cat again"])):
        during = keys(index, "fish cat", k=10)
        assert ("window", 0) in during
        assert ("window", 1) in during
    assert index.search(terms("cat dog bird fish"), k=10) == before
    assert len(index) == 3
    with pytest.raises(ValueError, match="unit of their own"), index.including(docs("u1", ["x"])):
        pass


def test_chinese_queries_find_chinese_messages() -> None:
    index = RecallIndex()
    index.add(docs("u1", ["我们上周去北京爬山了", "今天下雨", "明天去上海"]))
    assert keys(index, "北京爬山")[0] == ("u1", 0)


@pytest.mark.skipif(not (LOCOMO / "conv-26.json").exists(), reason="LoCoMo dev files absent")
def test_locomo_evidence_recall() -> None:
    """Sparse scoring alone on the dev conversations, categories 1-4: the evidence turns
    in the top 5, 10 and 25 (the whole pipeline, with meaning, is checked in test_recall)."""
    recall: dict[int, list[float]] = {5: [], 10: [], 25: []}
    for path in sorted(LOCOMO.glob("conv-*.json")):
        index = RecallIndex()
        seen: dict[object, int] = {}
        for m in read_transcript(path).messages:
            session = m.metadata["session"]
            position = seen[session] = seen.get(session, -1) + 1
            words = terms(m.content) + date_terms(m.timestamp)
            index.add([Doc(m.metadata["dia_id"], session, position, words, m.metadata["speaker"])])
        for qa in json.loads(path.read_text("utf-8"))["qa"]:
            if qa["category"] == 5 or not qa.get("evidence"):
                continue
            question = qa["question"]
            found = keys(index, question, k=25, speaker=index.named_speaker(question))
            evidence = {e.strip() for item in qa["evidence"] for e in item.split(";")}
            for k, values in recall.items():
                values.append(len(evidence & set(found[:k])) / len(evidence))
    at = {k: sum(v) / len(v) for k, v in recall.items()}
    assert at[5] >= 0.70, at
    assert at[10] >= 0.78, at
    assert at[25] >= 0.85, at
