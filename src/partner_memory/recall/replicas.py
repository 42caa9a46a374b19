"""This host's copies of the namespaces' recall indexes, each brought up to the database.

A namespace's index is derived data: a directory under the home (one per
namespace, named by a hash of it), following the rows the "recall" consumer
writes and the rolling log, like any follower. Before a search the index is
compared with the database (`RecallState`); if it is behind, the rows and
rollings it lacks are added, under a lock that threads share and an `flock`
that processes share, so any number of processes on a host keep one copy
and never search a stale one. A generation it was not built for (a forget,
a reindex, a namespace made again) or a position the database has not
reached (a restored backup) means a rebuild.

Where the home is: `RecallIndexSettings.directory`, else beside a SQLite
file (`<file>-recall/`), else under the user's cache directory for a
PostgreSQL server (one per server and database), else in memory.

Beside each index directory a small file names its namespace and the
generation it was built for (`<dir>.namespace`), so that `stale` can find the
copies a forget elsewhere left behind without opening them (the
`ReplicaFollower` calls it on every host, whether or not it searches).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from partner_memory.errors import ConfigurationError
from partner_memory.model import load_metadata
from partner_memory.recall.filters import metadata_tags
from partner_memory.recall.searcher import Doc
from partner_memory.recall.tantivy_index import INDEX_FORMAT, IndexState, TantivyIndex
from partner_memory.store.contract.capabilities import RecallRow, RecallState

log = logging.getLogger(__name__)

#: Indexes a process keeps open (opening one again costs milliseconds).
OPEN_INDEXES = 256
#: Rollings read from the log per step when the index is ahead of the rows.
LOG_STEP = 100
#: Recall rows read and added at a time (a rebuild of a million holds this many).
ROWS_PAGE = 50_000
#: The setting that keeps every index in memory (nothing on disk).
IN_MEMORY = "memory"


#: How long an index directory may go without saying what it is before `stale` takes it
#: for one made before copies were named (a new one is named when its first build ends).
UNNAMED_GRACE_S = 600.0
#: How often a host looks for index copies a forget elsewhere made stale, in seconds.
FOLLOW_S = 5.0


@dataclass(frozen=True, slots=True)
class RecallIndexSettings:
    """Where this host keeps the recall indexes (`PARTNER_MEMORY_RECALL_INDEX`): a
    directory, or "memory"; unset, next to the database. `follow_s`
    (`PARTNER_MEMORY_RECALL_FOLLOW_S`): how often the host drops the copies a forget,
    a purge or a reindex elsewhere made stale."""

    directory: str | None = None
    follow_s: float = FOLLOW_S

    def __post_init__(self) -> None:
        if not 0 < self.follow_s <= 3600:
            raise ConfigurationError(
                f"PARTNER_MEMORY_RECALL_FOLLOW_S must be above 0 and at most 3600 seconds,"
                f" got {self.follow_s}"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RecallIndexSettings:
        env = os.environ if environ is None else environ
        given = env.get("PARTNER_MEMORY_RECALL_FOLLOW_S") or str(FOLLOW_S)
        try:
            follow = float(given)
        except ValueError:
            raise ConfigurationError(
                f"PARTNER_MEMORY_RECALL_FOLLOW_S must be a number of seconds, got {given!r}"
            ) from None
        return cls(env.get("PARTNER_MEMORY_RECALL_INDEX") or None, follow)

    def home(self, store_url: str) -> Path | None:
        """The directory for a store's indexes (None: in memory)."""
        if self.directory == IN_MEMORY:
            return None
        if self.directory:
            return Path(self.directory).expanduser()
        if store_url.startswith("memory://"):
            return None
        if "://" in store_url:  # a server: one directory per server and database
            cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            name = hashlib.sha256(store_url.encode()).hexdigest()[:16]
            return Path(cache) / "partner-memory" / "recall" / name
        path = Path(store_url)
        return path.with_name(path.name + "-recall")


#: What the engine hands the replicas to fill an index: the rows after a position up to
#: another, and the log's rollings after a position, as documents.
#: (after, through, offset, limit) -> that page of the recall rows.
RowsReader = Callable[[int, int, int, int], Sequence[RecallRow]]
LogReader = Callable[[int], tuple[int, Sequence[Doc]] | None]


class IndexReplicas:
    """The open indexes of one store, least recently searched closed first."""

    def __init__(
        self, home: Path | None, *, required: bool = True, capacity: int = OPEN_INDEXES
    ) -> None:
        """`required`: a home that cannot be made is an error (it was asked for); else
        the indexes are kept in memory, with a warning (a read-only disk, say)."""
        self._capacity = capacity
        self._open: OrderedDict[str, TantivyIndex] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        if home is not None:
            try:
                home.mkdir(parents=True, exist_ok=True)
                probe = home / ".writable"
                probe.touch()
                probe.unlink()
            except OSError as exc:
                reason = f"cannot keep recall indexes in {home}: {exc.strerror or exc}"
                if required:
                    raise ConfigurationError(
                        f"{reason} (set PARTNER_MEMORY_RECALL_INDEX to a writable directory,"
                        " or 'memory')"
                    ) from exc
                log.warning("%s; keeping them in memory (PARTNER_MEMORY_RECALL_INDEX)", reason)
                home = None
        self.home = home

    def _directory(self, namespace: str) -> Path | None:
        if self.home is None:
            return None
        name = hashlib.sha256(namespace.encode()).hexdigest()[:32]
        return self.home / f"v{INDEX_FORMAT}" / name

    def index(self, namespace: str) -> TantivyIndex:
        """The namespace's index as of its last commit."""
        directory = self._directory(namespace)
        with self._lock:
            held = self._open.get(namespace)
            if held is not None and (directory is None or directory.exists()):
                self._open.move_to_end(namespace)
                return held
            self._open.pop(namespace, None)  # purged by another process: opened again
        opened = TantivyIndex(directory)
        with self._lock:
            held = self._open.setdefault(namespace, opened)
            self._open.move_to_end(namespace)
            while len(self._open) > self._capacity:
                self._open.popitem(last=False)
        return held

    def current(
        self,
        namespace: str,
        state: RecallState,
        rows: RowsReader,
        rollings: LogReader,
        *,
        embedder: str | None,
    ) -> TantivyIndex:
        """The namespace's index holding every rolling up to `state.head`."""
        index = self.index(namespace)
        if _up_to(index.refresh(), state):
            return index
        with self._writing(namespace):
            held = index.refresh()  # another thread or process may have done it
            if _up_to(held, state):
                return index
            if held.generation != state.generation or held.loaded > state.head:
                index.add([], loaded=-1, generation=state.generation, clear=True)
            after, offset = index.state.loaded, 0
            while index.state.loaded < state.indexed:  # in pages: a rebuild's memory is bounded
                page = rows(after, state.indexed, offset, ROWS_PAGE)
                done = len(page) < ROWS_PAGE
                if not done:  # the page's last unit waits for the next one, whole (unless
                    # it fills the page): a unit added in one piece rewrites no neighbours
                    cut = len(page)
                    while cut and page[cut - 1].unit_id == page[-1].unit_id:
                        cut -= 1
                    page = page[:cut] or page
                offset += len(page)
                index.add(
                    [_doc(r) for r in page],
                    loaded=state.indexed if done else None,
                    embedder=state.embedder if done else None,
                )
            while index.state.loaded < state.head:  # rollings the indexer has not reached
                step = rollings(index.state.loaded)
                if step is None:
                    break
                seq, more = step
                index.add(more, loaded=seq, embedder=index.state.embedder or embedder)
            self._name(namespace, state.generation)
        return index

    def _name(self, namespace: str, generation: int) -> None:
        """Write what the index beside it is: its namespace and generation (`stale`)."""
        directory = self._directory(namespace)
        if directory is None:
            return
        said = json.dumps({"namespace": namespace, "generation": generation})
        sidecar = directory.with_suffix(".namespace")
        try:
            if sidecar.exists() and sidecar.read_text("utf-8") == said:
                return
            partial = sidecar.with_suffix(".namespace.tmp")
            partial.write_text(said, "utf-8")
            partial.replace(sidecar)
        except OSError as exc:  # then `stale` drops the copy: rebuilt when next searched
            log.warning("cannot name the recall index %s: %s", directory, exc)

    def stale(self, generation_of: Callable[[str], int | None]) -> list[str]:
        """Drop every copy on this host whose namespace the database no longer has at the
        generation it was built for (a forget, a purge or a reindex on another host, a
        namespace forgotten), and every copy that does not say what it is; the names of
        those dropped (a nameless one as its directory). `generation_of` gives the
        database's generation of a namespace, None when it is gone."""
        if self.home is None:
            return []
        layout = self.home / f"v{INDEX_FORMAT}"
        dropped: list[str] = []
        for directory in sorted(layout.iterdir()) if layout.is_dir() else ():
            if not directory.is_dir():
                if directory.suffix == ".namespace" and not directory.with_suffix("").exists():
                    directory.unlink(missing_ok=True)  # its index was purged
                continue
            named = _named(directory)
            if named is None:  # made before copies were named, torn, or being built now
                if time.time() - directory.stat().st_mtime < UNNAMED_GRACE_S:
                    continue
                with _flocked(directory):
                    if _named(directory) is None:
                        shutil.rmtree(directory, ignore_errors=True)
                        dropped.append(directory.name)
                continue
            namespace, generation = named
            wanted = generation_of(namespace)
            if wanted == generation:
                continue
            with self._writing(namespace):  # a search may have just rebuilt it: look again
                now = _named(directory)
                if now is not None and now[1] == wanted:
                    continue
                self._remove(namespace, directory)
            dropped.append(namespace)
        return dropped

    @contextmanager
    def _writing(self, namespace: str) -> Iterator[None]:
        with self._lock:
            lock = self._locks.setdefault(namespace, threading.Lock())
        with lock:
            directory = self._directory(namespace)
            if directory is None:
                yield
                return
            directory.parent.mkdir(parents=True, exist_ok=True)
            with _flocked(directory):
                yield

    def drop(self, namespace: str) -> None:
        """Remove the namespace's index from this host (rebuilt when next searched)."""
        directory = self._directory(namespace)
        with self._lock:
            if namespace not in self._open and (directory is None or not directory.exists()):
                return  # never indexed here: nothing to remove (and no lock file to leave)
        with self._writing(namespace):
            self._remove(namespace, directory)

    def _remove(self, namespace: str, directory: Path | None) -> None:
        """The copy's files and open handle gone (under `_writing`)."""
        with self._lock:
            self._open.pop(namespace, None)
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
            directory.with_suffix(".namespace").unlink(missing_ok=True)

    def purge(self) -> None:
        """Every index of this host emptied of what was forgotten: each is rebuilt from
        the database on its next search, and the files of the old one are deleted."""
        if self.home is None:
            with self._lock:
                self._open.clear()
            return
        with self._lock:
            names = list(self._open)
        for namespace in names:
            self.drop(namespace)
        for layout in self.home.iterdir():  # indexes no process of ours has opened
            for entry in layout.iterdir() if layout.is_dir() else ():
                if entry.is_dir():
                    with _flocked(entry):
                        shutil.rmtree(entry, ignore_errors=True)
                        entry.with_suffix(".namespace").unlink(missing_ok=True)


@contextmanager
def _flocked(directory: Path) -> Iterator[None]:
    """The lock processes share on an index directory (its `.lock` file beside it)."""
    with open(directory.with_suffix(".lock"), "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _named(directory: Path) -> tuple[str, int] | None:
    """What the file beside an index directory says it is: (namespace, generation)."""
    try:
        said = json.loads(directory.with_suffix(".namespace").read_text("utf-8"))
        return str(said["namespace"]), int(said["generation"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _up_to(held: IndexState, state: RecallState) -> bool:
    return held.generation == state.generation and held.loaded == state.head


def _doc(row: RecallRow) -> Doc:
    tags = metadata_tags(load_metadata(row.metadata)) if row.metadata else ()
    return Doc(
        row.unit_id,
        row.position,
        row.terms.split(),
        row.speaker,
        row.timestamp,
        row.vector,
        row.role,
        tags,
        row.asks,
    )
