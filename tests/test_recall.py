"""Recall through the whole system, on every backend: stored and unrolled messages,
the indexer behind or absent, reindex, imports, copies, dates, Chinese, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from partner_memory import InvalidInputError, Message, NotFoundError, PartnerMemory
from partner_memory.cli import app
from partner_memory.interop import copy_memory, import_partner_state
from partner_memory.recall.results import RecallResult
from partner_memory.store import MemoryStore, open_store
from tests.helpers import BEAM_DIR, LOCOMO_DIR, needs_beam, needs_locomo, raw_sql

EXAMPLE = Path(__file__).parent.parent / "examples" / "partner-state"
DAY = 86_400_000
START = 1_700_000_000_000


def _where(found: RecallResult) -> list[tuple[str | None, str]]:
    return [(h.unit_id, h.message.content.split("\n\n")[-1]) for h in found.hits]


def _converse(memory: PartnerMemory) -> None:
    memory.record_messages(
        [
            Message("user", "I adopted a cat named Luna last week", timestamp=START),
            Message("assistant", "How lovely! What colour is she?", timestamp=START + 1000),
            Message("user", "Black, with white paws", timestamp=START + 2000),
        ],
        interaction=START + 2000,
    )
    memory.roll_now()
    memory.record_messages(
        [
            Message("user", "We plan a trip to Kyoto in spring", timestamp=START + 9 * DAY),
            Message("assistant", "The cherry blossoms will be out", timestamp=START + 9 * DAY),
        ],
        interaction=START + 9 * DAY,
    )
    memory.wait()


def test_recall_finds_stored_messages_with_their_slices_and_the_window(
    store: MemoryStore,
) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _converse(memory)
        found = memory.recall("what is the name of the cat?", k=2)
        unit = found.hits[0].unit_id
        assert _where(found)[0] == (unit, "I adopted a cat named Luna last week")
        assert unit is not None
        assert found.hits[0].position == 0
        (holder,) = found.slices
        assert holder.unit_id == unit
        assert holder.slice.start_index <= 0 < holder.slice.end_index
        window = memory.recall("Kyoto", k=5)
        assert _where(window)[0] == (None, "We plan a trip to Kyoto in spring")
        assert window.hits[0].position is None
        assert window.slices == []


def test_everything_recorded_before_a_call_is_found_without_the_indexer(
    store_url: str,
) -> None:
    """A read-only process runs no indexer, and the indexer may lag or have crashed:
    a search reads the rollings it has not indexed from the log itself."""
    store = open_store(store_url)
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _converse(memory)
        expected = _where(memory.recall("cat paws Kyoto", k=10))
        raw_sql(store, "DELETE FROM recall_docs")
        raw_sql(store, "UPDATE consumers SET position = 0 WHERE name = 'recall'")
    store.close()
    reader = open_store(store_url, read_only=True)
    try:
        with PartnerMemory(reader, "agent", idle_timer=False, create=False) as memory:
            assert _where(memory.recall("cat paws Kyoto", k=10)) == expected
    finally:
        reader.close()


def test_reindex_gives_the_same_results(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _converse(memory)
        before = _where(memory.recall("white paws cat", k=10))
        assert memory.service.reindex("agent") == 3
        assert _where(memory.recall("white paws cat", k=10)) == before


def test_imported_and_copied_memory_is_recalled(store: MemoryStore, tmp_path: Path) -> None:
    import_partner_state(store, EXAMPLE, namespace="imported")
    with PartnerMemory(store, "imported", idle_timer=False, create=False) as memory:
        found = memory.recall("budget", k=3)
        assert found.hits
        assert any(h.unit_id is not None for h in found.hits)  # the units, not only the window
        assert "budget" in found.hits[0].message.content.lower()
    copy = open_store(tmp_path / "copy.db")
    try:
        copy_memory(store, copy)
        with PartnerMemory(copy, "imported", idle_timer=False, create=False) as memory:
            assert _where(memory.recall("budget", k=3)) == _where(found)
    finally:
        copy.close()


def test_time_range_and_chinese(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _converse(memory)
        memory.record_messages(
            [Message("user", "我们上周去北京爬山了", timestamp=START + 10 * DAY)]
        )
        assert _where(memory.recall("北京爬山"))[0][1] == "我们上周去北京爬山了"
        early = memory.recall("cat Kyoto", until=START + DAY)
        assert {text for _, text in _where(early)} <= {
            "I adopted a cat named Luna last week",
            "How lovely! What colour is she?",
            "Black, with white paws",
        }
        late = memory.recall("cat Kyoto", since=START + DAY)
        assert _where(late)[0][1] == "We plan a trip to Kyoto in spring"


@pytest.mark.parametrize(
    ("query", "k", "says"),
    [("", 10, "query"), ("   ", 10, "query"), ("cat", 0, "k must"), ("cat", 101, "k must")],
)
def test_bad_recall_input_is_refused(store: MemoryStore, query: str, k: int, says: str) -> None:
    with (
        PartnerMemory(store, "agent", idle_timer=False) as memory,
        pytest.raises(InvalidInputError, match=says),
    ):
        memory.recall(query, k=k)


def test_recall_of_an_unknown_namespace(store: MemoryStore) -> None:
    from partner_memory import MemoryService

    with MemoryService(store, idle_timer=False) as service, pytest.raises(NotFoundError):
        service.recall.recall("ghost", "anything")


def test_cli_recall(store_url: str) -> None:
    runner = CliRunner()
    store = open_store(store_url)
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _converse(memory)
    store.close()
    table = runner.invoke(app, ["recall", "Luna", "--db", store_url, "-n", "agent"])
    assert table.exit_code == 0, table.output
    assert "I adopted a cat named Luna" in table.output
    reindexed = runner.invoke(app, ["reindex", "--db", store_url, "-n", "agent"])
    assert "3 messages" in reindexed.output
    bad = runner.invoke(app, ["recall", "Luna", "--db", store_url, "-n", "agent", "-k", "0"])
    assert bad.exit_code == 4
    assert "k must" in bad.output


@needs_locomo
def test_bench_locomo_through_the_whole_pipeline(tmp_path: Path) -> None:
    """Ingested, rolled, indexed by the consumer, recalled: the issue's targets with the
    default offline install (words and the static embedder), meaning adding to words,
    and well above plain BM25 over single turns."""
    import json

    done = CliRunner().invoke(app, ["bench", "locomo", str(LOCOMO_DIR), "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    ours, words, plain = report["systems"]
    assert [s["name"] for s in report["systems"]] == ["recall", "recall, words", "BM25 turns"]
    assert report["questions"] > 700
    assert ours["recall_at"]["5"]["all"] >= 0.70
    assert ours["recall_at"]["10"]["all"] >= 0.79
    assert ours["recall_at"]["25"]["all"] >= 0.85
    assert ours["recall_at"]["10"]["all"] > words["recall_at"]["10"]["all"] + 0.005
    assert ours["recall_at"]["10"]["all"] > plain["recall_at"]["10"]["all"] + 0.1
    empty = CliRunner().invoke(app, ["bench", "locomo", str(tmp_path)])
    assert empty.exit_code == 4
    assert "no LoCoMo conversation" in empty.output


def test_no_message_is_found_twice_when_a_rolling_keeps_it_in_the_window(
    store: MemoryStore,
) -> None:
    """A rolling keeps the window's last messages held while they are stored: recall
    gives each message once, the stored copy (with its unit), and still k of them."""
    with PartnerMemory(store, "dupes", idle_timer=False) as memory:
        for i in range(36):
            memory.record_turn(f"garden note {i} about tomatoes", f"reply {i} about the garden")
        memory.roll_now()
        memory.wait()
        held = {h.message.id for h in memory.window()}
        units = memory.core.list_units().units
        stored = {m.id for u in units for m in memory.core.read_messages(u.id)}
        assert held & stored, "the rolling kept no message in the window: nothing to test"
        for k in (5, 40, 100):
            hits = memory.recall("garden", k=k, activate=False).hits
            ids = [h.message.id for h in hits]
            assert len(ids) == len(set(ids)) == min(k, 72)
            for hit in hits:
                if hit.message.id in stored:
                    assert hit.unit_id is not None


@needs_beam
def test_bench_beam_scores_each_ability_beside_plain_bm25(tmp_path: Path) -> None:
    """Two BEAM conversations through the whole pipeline, with the folds and the paired
    intervals printed."""
    import json
    import shutil

    for name in ("1", "2"):
        shutil.copytree(BEAM_DIR / name, tmp_path / "beam" / name)
    done = CliRunner().invoke(app, ["bench", "beam", str(tmp_path / "beam"), "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert [s["name"] for s in report["systems"]] == ["recall", "BM25 messages"]
    assert report["conversations"] == 2
    assert report["questions"] > 25
    ours = report["systems"][0]
    assert {"knowledge_update", "temporal_reasoning"} <= set(ours["recall_at"]["10"])
    assert set(ours["by_conversation"]) == {"1", "2"}
    assert {p["conversation"] for p in report["paired"]} == {"1", "2", "all"}
    shown = CliRunner().invoke(app, ["bench", "beam", str(tmp_path / "beam"), "--folds"])
    assert shown.exit_code == 0, shown.output
    assert "R@10 per conversation" in shown.output
    assert "paired R@10 difference" in shown.output
    empty = CliRunner().invoke(app, ["bench", "beam", str(tmp_path / "none")])
    assert empty.exit_code != 0


def test_what_recall_found_enters_the_context(store: MemoryStore) -> None:
    """The activated_memory_slices block: the slice's summary, dated, the found message
    quoted; the next search replaces it; `activate=False` leaves context alone."""
    from partner_memory.recall.context import ACTIVATED_MEMORY_SLICES, activated_block

    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        _converse(memory)

        def block() -> str | None:
            found = [b for b in memory.context() if b.name == ACTIVATED_MEMORY_SLICES]
            return found[0].snapshot if found else None

        memory.recall("cat", activate=False)
        assert block() is None
        found = memory.recall("what is the cat called?")
        shown = block()
        assert shown is not None
        assert "recalled for 'what is the cat called?'" in shown
        assert "I adopted a cat named Luna" in shown  # the slice's summary
        full = activated_block(found, memory.settings)
        assert full is not None
        assert "> I adopted a cat named Luna last week" in full.full  # the message, quoted
        assert " UTC] " in full.full  # the slice's date
        memory.recall("Kyoto spring")
        assert "Kyoto" in (block() or "")
        assert "recalled for 'Kyoto spring'" in (block() or "")


def test_the_readme_examples_find_what_they_promise(store: MemoryStore) -> None:
    """The library example's turns, then its question and the client example's."""
    with PartnerMemory(store, "agent-42/user-7", idle_timer=False) as memory:
        memory.record_turn(
            "I'm off to Kyoto in April, and I don't eat seafood.",
            "Noted: no seafood. Book early, it's cherry-blossom season.",
            source="USER: Mei",
        )
        memory.record_turn("Are you there?", "NO_REPLY")
        for rolled in (False, True):
            if rolled:
                memory.roll_now()
                memory.wait()
            for question in ("where is Mei travelling?", "when is the Kyoto trip?"):
                hits = memory.recall(question, k=5).hits
                assert hits[0].message.text.startswith("I'm off to Kyoto"), (question, rolled)
