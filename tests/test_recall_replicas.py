"""This host's recall indexes: kept on disk, opened again without a rebuild, shared by
processes, never searched stale, rebuilt for another generation, dropped by a forget."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from partner_memory import MemoryService, Message, RollingSettings, open_store
from partner_memory.errors import ConfigurationError
from partner_memory.recall.indexer import RECALL_CONSUMER
from partner_memory.recall.replicas import IndexReplicas, RecallIndexSettings
from partner_memory.recall.results import RecallResult
from partner_memory.recall.tantivy_index import TantivyIndex

ROOT = Path(__file__).resolve().parent.parent
QUIET = RollingSettings(idle_check_interval_s=0)


def _service(database: str, home: Path | None = None) -> MemoryService:
    where = RecallIndexSettings(str(home) if home is not None else None)
    return MemoryService.open(database, settings=QUIET, recall_index=where)


def _remember(service: MemoryService, namespace: str, *texts: str, idle: bool = False) -> None:
    """`texts` rolled; `idle`: the rolling ends the memory session (a unit of its own)."""
    memory = service.memory(namespace)
    memory.record_messages([Message("user", text) for text in texts])
    memory.roll_now(idle=idle)
    memory.wait()


def _mentions(found: RecallResult, word: str) -> bool:
    """Whether a hit says `word` (a search may still find what is nearest by meaning)."""
    return any(word.lower() in h.message.content.lower() for h in found.hits)


def test_the_index_home_follows_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert RecallIndexSettings().home(str(tmp_path / "m.db")) == tmp_path / "m.db-recall"
    assert RecallIndexSettings().home("memory://x") is None
    assert RecallIndexSettings("memory").home(str(tmp_path / "m.db")) is None
    assert RecallIndexSettings(str(tmp_path / "i")).home("postgresql://h/db") == tmp_path / "i"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    one = RecallIndexSettings().home("postgresql://u@h:5432/db")
    other = RecallIndexSettings().home("postgresql://u@h:5432/other")
    assert one is not None
    assert one.parent == tmp_path / "cache" / "partner-memory" / "recall"
    assert one != other
    env = {"PARTNER_MEMORY_RECALL_INDEX": "memory"}
    assert RecallIndexSettings.from_env(env).directory == "memory"
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(ConfigurationError, match="PARTNER_MEMORY_RECALL_INDEX"):
        _service(str(tmp_path / "m.db"), blocked / "indexes")


def test_a_new_process_opens_the_index_without_rebuilding_it(tmp_path: Path) -> None:
    database = str(tmp_path / "m.db")
    with _service(database) as service:
        _remember(service, "ns", "We booked a ryokan in Kyoto", "for the first week of April")
        assert service.memory("ns").recall("ryokan").hits
    assert (tmp_path / "m.db-recall").is_dir()
    with _service(database) as again:
        head = again.store.log_head("ns")
        assert again.recall.replicas.index("ns").state.loaded == head  # read from its files

        def refuse(*_: object) -> object:
            raise AssertionError("the index was rebuilt")

        again.store.recall_rows = refuse  # type: ignore[method-assign]
        found = again.memory("ns").recall("ryokan")
        assert "ryokan" in found.hits[0].message.content


_SEARCH = """
import json, sys
from partner_memory import MemoryService, RollingSettings
with MemoryService.open(sys.argv[1], settings=RollingSettings(idle_check_interval_s=0)) as s:
    hits = s.memory("ns").recall("kyoto temples", k=50).hits
    index = s.recall.replicas.index("ns")
    print(json.dumps({"hits": [h.message.id for h in hits], "held": len(index)}))
"""


def test_processes_catch_up_one_index_together_and_find_everything(tmp_path: Path) -> None:
    """Three processes search a namespace whose index is far behind, at once: one
    brings it up to date while the others wait for it; all find the same, and the
    index holds every message once."""
    database = str(tmp_path / "m.db")
    with _service(database, tmp_path / "elsewhere") as writer:  # another host wrote them
        for i in range(30):
            _remember(writer, "ns", f"day {i}: the kyoto temples", f"day {i}: tea after")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _SEARCH, database],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err[-2000:]
        results.append(json.loads(out.splitlines()[-1]))
    assert results[0]["hits"]
    assert all(r["hits"] == results[0]["hits"] for r in results)
    assert {r["held"] for r in results} == {60}


def test_a_search_after_another_process_rolled_finds_it(tmp_path: Path) -> None:
    database = str(tmp_path / "m.db")
    with _service(database) as service:
        _remember(service, "ns", "The cat is called Luna")
        assert service.memory("ns").recall("luna").hits
        with _service(database) as other:  # another process on this host
            _remember(other, "ns", "Luna hates the vacuum cleaner")
        found = service.memory("ns").recall("vacuum cleaner")
        assert "vacuum" in found.hits[0].message.content


def test_a_forget_drops_this_hosts_copy_and_other_hosts_rebuild(tmp_path: Path) -> None:
    database = str(tmp_path / "m.db")
    with _service(database) as here, _service(database, tmp_path / "there") as there:
        _remember(here, "ns", "My locker code word is quokka", "and I like tea")
        assert here.memory("ns").recall("quokka").hits
        assert there.memory("ns").recall("quokka").hits
        secret = here.memory("ns").recall("quokka").hits[0].message.id
        directory = here.recall.replicas._directory("ns")
        assert directory is not None
        assert directory.is_dir()
        here.forget_messages("ns", [secret])
        assert not directory.exists()  # this host's copy went with the forget
        assert not _mentions(here.memory("ns").recall("quokka"), "quokka")
        assert not _mentions(there.memory("ns").recall("quokka"), "quokka")  # generation moved
        assert there.memory("ns").recall("tea").hits


def test_a_namespace_made_again_is_never_searched_with_the_old_index(tmp_path: Path) -> None:
    database = str(tmp_path / "m.db")
    with _service(database) as here, _service(database, tmp_path / "there") as there:
        _remember(here, "ns", "The old plan: Lisbon in May")
        assert there.memory("ns").recall("lisbon").hits  # the other host built its copy
        here.forget_namespace("ns")
        _remember(here, "ns", "The new plan: Oslo in June")
        assert not _mentions(there.memory("ns").recall("lisbon"), "Lisbon")
        assert there.memory("ns").recall("oslo").hits


_BUILD = """
import sys, time
import partner_memory.recall.tantivy_index as t
from partner_memory import MemoryService, RollingSettings
put = t._Part.put_state
def paused(self, writer, state):
    put(self, writer, state)
    if "loaded" in state and state["loaded"] >= 0:  # the messages' commit, blocks done
        print("blocks committed", flush=True)
        time.sleep(120)
t._Part.put_state = paused
with MemoryService.open(sys.argv[1], settings=RollingSettings(idle_check_interval_s=0)) as s:
    s.memory("ns").recall("kyoto")
"""


@pytest.mark.slow
def test_a_kill_while_the_index_is_written_leaves_it_behind_never_wrong(tmp_path: Path) -> None:
    """SIGKILL while a process catches the index up, after the blocks' commit and before
    the messages': the next search adds those rollings again, and finds exactly what an
    index that was never killed finds (no block counts a message twice)."""
    database = str(tmp_path / "m.db")
    reference = tmp_path / "reference"  # a host that does the same, never killed
    with _service(database) as here, _service(database, reference) as twin:
        for i in range(5):  # this host's index, up to date...
            _remember(here, "ns", f"kyoto note {i}", f"the temples, part {i}", idle=i % 2 == 0)
        assert here.memory("ns").recall("kyoto").hits
        assert twin.memory("ns").recall("kyoto").hits
        built = here.store.log_head("ns")
    with _service(database, tmp_path / "elsewhere") as writer:  # ...then another host rolls
        for i in range(5, 10):
            _remember(writer, "ns", f"kyoto {i}", f"the temples, part {i}", idle=i % 2 == 0)
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_BUILD), database],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None
        assert child.stderr is not None
        line = child.stdout.readline()  # however long the machine takes to get there
        if line.strip() != "blocks committed":
            child.kill()
            pytest.fail(child.stderr.read()[-2000:])
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    with _service(database) as after, _service(database, reference) as fresh:
        index = after.recall.replicas.index("ns")
        assert index.state.loaded == built  # the messages never committed, the blocks did
        found = after.memory("ns").recall("kyoto temples", k=30)
        expected = fresh.memory("ns").recall("kyoto temples", k=30)
        assert {h.message.id for h in found.hits} == {h.message.id for h in expected.hits}
        assert len(found.hits) == 20
        state = after.store.recall_state("ns", RECALL_CONSUMER)
        mine, theirs = index.refresh(), fresh.recall.replicas.index("ns").refresh()
        assert mine.loaded == theirs.loaded == state.head
        assert (mine.messages, mine.tokens, mine.block_tokens) == (
            theirs.messages,
            theirs.tokens,
            theirs.block_tokens,
        )
        assert _blocks(index) == _blocks(fresh.recall.replicas.index("ns"))
        # scores: tantivy counts deleted documents until segments merge, so the two
        # indexes' statistics may differ by the documents the killed process replaced
        for mine_hit, their_hit in zip(
            sorted(found.hits, key=lambda h: h.message.id),
            sorted(expected.hits, key=lambda h: h.message.id),
            strict=True,
        ):
            assert mine_hit.score == pytest.approx(their_hit.score, rel=0.01)


def _blocks(index: TantivyIndex) -> list[bytes]:
    """Every block document's terms: each message's once, whatever was added again."""
    import tantivy

    searcher = index._blocks.index.searcher()
    every = searcher.search(tantivy.Query.all_query(), 10_000).hits
    return sorted(bytes(searcher.doc(a).get_first("own") or b"") for _, a in every)


def test_the_recall_index_can_live_in_memory(tmp_path: Path) -> None:
    database = str(tmp_path / "m.db")
    with MemoryService.open(
        database, settings=QUIET, recall_index=RecallIndexSettings("memory")
    ) as service:
        _remember(service, "ns", "The kyoto trip")
        assert service.memory("ns").recall("kyoto").hits
    assert not (tmp_path / "m.db-recall").exists()
    store = open_store(database, read_only=True)
    try:
        with MemoryService(store, recall_index=RecallIndexSettings("memory")) as reader:
            assert reader.memory("ns", create=False).recall("kyoto").hits
    finally:
        store.close()


def test_an_unwritable_default_home_keeps_the_indexes_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A read-only disk (here: a path under a file) does not stop a reader: unless the
    directory was asked for, the indexes are kept in the process, with a warning."""
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    replicas = IndexReplicas(blocked / "indexes", required=False)
    assert replicas.home is None
    assert "keeping them in memory" in caplog.text
    with pytest.raises(ConfigurationError, match="cannot keep recall indexes"):
        IndexReplicas(blocked / "indexes")


def test_forgetting_what_this_host_never_searched_leaves_no_file(tmp_path: Path) -> None:
    database = str(tmp_path / "m.db")
    with _service(database, tmp_path / "indexes") as service:
        _remember(service, "ns", "The kyoto trip")
        service.forget_namespace("ns")
    left = list((tmp_path / "indexes").rglob("*"))
    # only the empty lock that says which process follows the log (`FollowLock`)
    assert [p.name[:7] for p in left] == ["follow-"]
    assert left[0].stat().st_size == 0


def test_a_rebuild_reads_the_rows_in_pages_and_finds_every_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 5 rows over four units of 3: each page ends with a whole unit; a unit
    longer than a page is split. Either way the rebuilt index finds what one built from a
    single read found (scores differ a little: tantivy's statistics count the documents
    each commit replaced until segments merge)."""
    from partner_memory.recall import replicas

    database = str(tmp_path / "m.db")
    with _service(database) as service:
        for unit in range(4):
            _remember(service, "ns", *(f"note {unit}{i} on topic{i}" for i in range(3)), idle=True)
        service.reindex("ns")  # every row at seq 0: pages within one seq
        memory = service.memory("ns")

        def ranked() -> list[set[str]]:
            return [{h.message.id for h in memory.recall(f"topic{t}", k=20).hits} for t in range(3)]

        expected = ranked()
        calls: list[tuple[int, int]] = []
        read = service.store.recall_rows

        def paged(namespace: str, after: int, through: int, **page: int) -> object:
            calls.append((page["offset"], page["limit"]))
            return read(namespace, after, through, **page)

        monkeypatch.setattr(service.store, "recall_rows", paged)
        monkeypatch.setattr(replicas, "ROWS_PAGE", 5)
        service.recall.replicas.drop("ns")
        assert ranked() == expected
        assert calls == [(0, 5), (3, 5), (6, 5), (9, 5)]
        assert len(service.recall.replicas.index("ns")) == 12
        monkeypatch.setattr(replicas, "ROWS_PAGE", 2)  # every unit split
        service.recall.replicas.drop("ns")
        assert ranked() == expected
        assert len(service.recall.replicas.index("ns")) == 12
