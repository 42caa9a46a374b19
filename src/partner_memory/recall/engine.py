"""Recall: the rules of a search, over one namespace's index, never stale.

Before each search the namespace's index (`replicas`, this host's copy) is
brought up to the database: the rows the "recall" consumer has written since
(in log order), then the rollings it has not indexed yet, read from the log
itself; the window is searched with it, never stored. So everything recorded
before a search is found by it, in any process on any host, whether or not
the indexer has caught up - and a read-only store can be searched too. A
forget or a reindex moves the namespace's generation on, and an index of
another generation is rebuilt.

Meaning is compared only when the namespace's vectors were made by this
engine's embedder; otherwise (or when the embeddings endpoint fails) the
search is by words alone.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Unpack

from opentelemetry import trace

from partner_memory.errors import InvalidInputError, LLMError, NotFoundError
from partner_memory.model import TOPIC_SEPARATOR, MemorySlice, Message, check_text
from partner_memory.recall.analyze import RecallAnalysis, terms
from partner_memory.recall.dates import find_date_cue
from partner_memory.recall.embed import embed_bounded
from partner_memory.recall.filters import metadata_tags
from partner_memory.recall.indexer import RECALL_CONSUMER
from partner_memory.recall.query import RecallOptions, RecallQuery
from partner_memory.recall.replicas import LOG_STEP, IndexReplicas, RecallIndexSettings
from partner_memory.recall.results import (
    ONLY,
    PREFERRED,
    DateRange,
    RecalledMessage,
    RecalledSlice,
    RecallResult,
    TopicMatch,
)
from partner_memory.recall.searcher import Doc, Hit, Search, Searcher
from partner_memory.recall.topics import MAX_LEVEL_CHARS, normalize_path
from partner_memory.store.contract.base import MemoryStore
from partner_memory.store.contract.capabilities import (
    RECALL_ROWS,
    TOPICS,
    RecallState,
    RecallStore,
    TopicStore,
    asks,
    require,
)
from partner_memory.telemetry.instruments import instruments
from partner_memory.telemetry.names import ENGINE_MS, INDEX_MS, PHASE, READ_MS

if TYPE_CHECKING:
    import numpy as np

#: Namespaces whose analysed window a process keeps (least recently searched go first).
HELD_WINDOWS = 256

#: Words that ask about a time without saying what about ("what happened", "我们聊了什么").
ASKING = frozenset(
    terms("happen happened discuss talk talked say said mention chat tell told speak spoke do")
) | {"聊", "说", "讨论", "发生", "什么", "做"}

#: A question that gathers what was said over time: the perfect ("what books has Tim
#: read?", "where have they camped?"), "both", "how many" - but not "how long has", nor
#: "how does ... has" (one thing asked, measured on LoCoMo dev).
GATHERING = re.compile(
    r"^(?!\s*how\s+(?:long|does|do|did)\b)(?=.*\b(?:has|have|both|how\s+many)\b)",
    re.IGNORECASE | re.DOTALL,
)

#: Related topics a recall names.
RELATED_TOPICS = 5

log = logging.getLogger(__name__)


@dataclass
class _Window:
    """The window as last searched, analysed, by (embedder, message id): a search
    analyses (and embeds) only what was recorded since."""

    docs: dict[tuple[str, str], Doc] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The terms its docs hold (what it costs to keep).
    terms: int = 0


#: Terms the held windows of all namespaces keep at most (~10 MB of references, the
#: terms themselves interned): beyond it the least recently searched are let go.
HELD_TERMS = 1_000_000


#: Hits this close in one unit are read as one range of messages.
RUN_GAP = 16


#: How far the nearest by meaning (`ranking.LEAD` of them) are raised when the words hold
#: little of the question and meaning found something nearer than they did
#: (`TantivyIndex._with_meaning`): 1, they lead. Figures in the README.
FUSION = 1.0


class RecallEngine:
    def __init__(
        self,
        store: MemoryStore,
        analysis: RecallAnalysis | None = None,
        *,
        replicas: IndexReplicas | None = None,
        fusion: float = FUSION,
    ) -> None:
        """`fusion`: how far the messages nearest by meaning are raised when the words
        hold little of the question (`Search.fusion`, `FUSION`)."""
        self._store = store
        self._fusion = fusion
        self._rows = store if isinstance(store, RecallStore) else None
        self._topics = store if isinstance(store, TopicStore) else None
        self._analysis = analysis or RecallAnalysis(None)
        self._words_only = RecallAnalysis(None)
        self.replicas = replicas or IndexReplicas(
            RecallIndexSettings().home(store.url), required=False
        )
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()

    def recall(
        self, namespace: str, query: str | RecallQuery, **options: Unpack[RecallOptions]
    ) -> RecallResult:
        """The best messages for the query (a `RecallQuery`, or its text and keywords);
        `activate` is the caller's to act on."""
        asked = RecallQuery.of(query, **options)
        topic, where, k = asked.topic, asked.where, asked.k
        match, kept = self._topic(namespace, topic) if topic is not None else (None, None)
        began = time.perf_counter()
        state = self._recall_rows().recall_state(namespace, RECALL_CONSUMER)
        analysis = self._for(state)
        index = self._current(namespace, state, analysis)
        window = self._store.load_trajectory(namespace).messages
        searched = time.perf_counter()
        bounds = self._bounds(asked, window, index)
        words = terms(asked.query)
        timed = bounds is not None and bounds.cue is not None and bounds.mode == ONLY
        if timed:  # the query's own date words (or meaning) would rank: time order instead
            words = []
        only = bounds is not None and bounds.mode == ONLY
        span = (bounds.start_at, bounds.end_at) if bounds is not None else (None, None)
        docs = self._window_docs(namespace, window, analysis)
        speaker = _named_speaker(asked.query, index.speakers, docs)
        if speaker is not None:  # its boost counts the name; matching the name too costs
            # a walk over most of that participant's messages and gains nothing (measured)
            name = set(terms(speaker))
            words = [w for w in words if w not in name] or words
        hits = index.search(
            Search(
                words,
                # a message kept in the window after its rolling is found twice (stored
                # and held): enough more are asked for that k remain once merged
                k=k + min(k, len(window)),
                speaker=speaker,
                since=span[0] if only else None,
                until=span[1] if only else None,
                prefer=None if only or bounds is None else span,
                dated=frozenset(terms(bounds.cue)) if bounds and bounds.cue else frozenset(),
                vector=None if timed else self._query_vector(asked.query, analysis),
                fusion=self._fusion,
                lead_all=analysis.reads_sentences,
                # a time asked for alone, or a topic: the rest of it, oldest first
                fill=kept is not None or (only and bounds is not None and bounds.cue is not None),
                newest_first=kept is None,
                within=kept,
                window=docs,
                where=None if where.empty else where,
                spread=GATHERING.search(asked.query) is not None,
            )
        )
        read = time.perf_counter()
        found = self._resolve(namespace, asked.query, hits, window, bounds, k=k)
        _phases(began, searched, read, time.perf_counter())
        return replace(found, topic=match)

    @staticmethod
    def _bounds(asked: RecallQuery, window: Sequence[Message], index: Searcher) -> DateRange | None:
        """The caller's bounds, else the query's date: "yesterday" is the day before the
        namespace's newest message. A query asking nothing but the time ("what happened
        yesterday") keeps to it; beside a question the time is preferred."""
        if asked.since is not None or asked.until is not None:
            return DateRange(None, asked.since, asked.until, ONLY)
        if not asked.dates:
            return None
        times = [m.timestamp for m in window if m.timestamp is not None]
        now = max([*times, index.newest or 0]) or int(time.time() * 1000)
        cue = find_date_cue(asked.query, now)
        if cue is None:
            return None
        rest = set(terms(asked.query.replace(cue.text, " "))) - ASKING
        return DateRange(cue.text, cue.since, cue.until, PREFERRED if rest else ONLY)

    def _topic(self, namespace: str, topic: str) -> tuple[TopicMatch, list[tuple[str, int, int]]]:
        """The slices filed under `topic` or below it; if none, under its nearest parent."""
        check_text(topic, "topic")
        asked = normalize_path(topic)
        if asked is None:
            raise InvalidInputError(
                f"topic must be levels joined by '->' of at most {MAX_LEVEL_CHARS} characters"
                f" each, got {topic!r}"
            )
        path = asked
        topics = require(self._store, TOPICS) if self._topics is None else self._topics
        slices = topics.topic_slices(namespace, path)
        while not slices and TOPIC_SEPARATOR in path:
            path = path.rsplit(TOPIC_SEPARATOR, 1)[0]
            slices = topics.topic_slices(namespace, path)
        root = path.split(TOPIC_SEPARATOR, 1)[0]
        related = [
            known
            for known, _ in topics.topic_paths(namespace, limit=1000)
            if known.split(TOPIC_SEPARATOR, 1)[0] == root
            and known != path
            and not known.startswith(path + TOPIC_SEPARATOR)
        ]
        ranges = list(dict.fromkeys((s.unit_id, s.start_index, s.end_index) for s in slices))
        match = TopicMatch(asked, path, len(ranges), related[:RELATED_TOPICS])
        return match, [(unit, first, end) for unit, first, end in ranges]

    def generation(self, namespace: str) -> int | None:
        """The database's recall generation of a namespace (None: it is gone), which an
        index copy must have been built for."""
        try:
            return self._recall_rows().recall_state(namespace, RECALL_CONSUMER).generation
        except NotFoundError:
            return None

    def _recall_rows(self) -> RecallStore:
        """The store's recall rows (ConfigurationError naming the capability if none)."""
        return require(self._store, RECALL_ROWS) if self._rows is None else self._rows

    def _for(self, state: RecallState) -> RecallAnalysis:
        """This engine's analysis if the namespace's vectors are its embedder's (or it
        has none yet), else words only."""
        own = self._analysis.embedder_name
        return self._analysis if state.embedder in (None, own) else self._words_only

    @staticmethod
    def _query_vector(query: str, analysis: RecallAnalysis) -> np.ndarray | None:
        if analysis.embedder is None:
            return None
        try:
            vector: np.ndarray = embed_bounded(analysis.embedder, [query])[0]
        except LLMError as exc:
            log.warning("recall by words only: %s", exc)
            return None
        return vector

    def _window_docs(
        self, namespace: str, window: Sequence[Message], analysis: RecallAnalysis
    ) -> list[Doc]:
        name = analysis.embedder_name
        with self._lock:
            held = self._windows.pop(namespace, None) or _Window()
            self._windows[namespace] = held  # most recent last
            while len(self._windows) > HELD_WINDOWS:
                del self._windows[next(iter(self._windows))]
        with held.lock:
            known = {m.id: held.docs[name, m.id] for m in window if (name, m.id) in held.docs}
        fresh = [m for m in window if m.id not in known]
        made = self._docs(fresh, analysis, None, 0, held=True)
        known.update(zip((m.id for m in fresh), made, strict=True))
        with held.lock:  # only the current window is kept: what left it is not held on to
            held.docs = {(name, m.id): known[m.id] for m in window}
            held.terms = sum(len(d.terms) for d in held.docs.values())
        self._bound_windows(namespace)
        return [replace(known[m.id], position=i) for i, m in enumerate(window)]

    def _bound_windows(self, searched: str) -> None:
        """Let go of the least recently searched windows past `HELD_TERMS` (never the
        one just searched): a burst of long messages is not held for ever."""
        with self._lock:
            total = sum(w.terms for w in self._windows.values())
            for namespace in list(self._windows):
                if total <= HELD_TERMS:
                    break
                if namespace != searched:
                    total -= self._windows.pop(namespace).terms

    def forget_window(self, namespace: str) -> None:
        """Drop what this process holds of the namespace's window (a forget: none of
        the forgotten text stays in memory here)."""
        with self._lock:
            self._windows.pop(namespace, None)

    def _current(self, namespace: str, state: RecallState, analysis: RecallAnalysis) -> Searcher:
        """The namespace's index with every rolling up to the database's newest."""

        def rollings(after: int) -> tuple[int, list[Doc]] | None:
            entries = self._store.read_log(namespace, after, limit=LOG_STEP)
            if not entries:
                return None
            docs = [
                doc
                for entry in entries
                for doc in self._docs(
                    entry.messages, analysis, entry.unit.id, entry.slice.start_index
                )
            ]
            return entries[-1].seq, docs

        return self.replicas.current(
            namespace,
            state,
            lambda after, through, offset, limit: self._recall_rows().recall_rows(
                namespace, after, through, offset=offset, limit=limit
            ),
            rollings,
            embedder=analysis.embedder_name,
        )

    def _docs(
        self,
        messages: Sequence[Message],
        analysis: RecallAnalysis,
        unit_id: str | None,
        first: int,
        *,
        held: bool = False,
    ) -> list[Doc]:
        """The messages as the index sees them; `held` (kept until the window rolls) interns
        each term as it is split, so a term said a million times is one string, not a
        million (the index's own docs are dropped once written, and skip that cost)."""
        split = (lambda words: list(map(sys.intern, words.split()))) if held else str.split
        try:
            rows = analysis.rows(messages)
        except LLMError as exc:  # the embeddings endpoint failed: words still find them
            log.warning("messages recalled by words only: %s", exc)
            rows = self._words_only.rows(messages)
        return [
            Doc(
                unit_id,
                first + i,
                split(words),
                speaker,
                m.timestamp,
                vector,
                m.role,
                metadata_tags(m.metadata),
                asks(m.content),
            )
            for i, (m, (speaker, words, vector)) in enumerate(zip(messages, rows, strict=True))
        ]

    def _resolve(
        self,
        namespace: str,
        query: str,
        hits: list[Hit],
        window: list[Message],
        bounds: DateRange | None,
        *,
        k: int,
    ) -> RecallResult:
        """The hits' messages, each once (a message held in the window and stored is one
        hit, at the better place, with its unit), the first `k`, and their slices."""
        found: list[RecalledMessage] = []
        slices: dict[tuple[str, str], RecalledSlice] = {}
        places = [hit.place for hit in hits]
        wanted: dict[str, list[int]] = {}
        for unit_id, position in places:
            if unit_id is not None:
                wanted.setdefault(unit_id, []).append(position)
        stored: dict[tuple[str, int], Message] = {}
        unit_slices: dict[str, dict[str, MemorySlice]] = {}
        ranges = [(u, run[0], run[-1] + 1) for u, p in wanted.items() for run in _runs(p)]
        excerpts = self._store.read_excerpts(namespace, ranges)  # one transaction
        for (unit_id, first, _), (rows, held) in zip(ranges, excerpts, strict=True):
            stored.update(((unit_id, first + i), m) for i, m in enumerate(rows))
            unit_slices.setdefault(unit_id, {}).update((s.id, s) for s in held)
        for hit, (unit_id, position) in zip(hits, places, strict=True):
            if unit_id is None:
                found.append(RecalledMessage(window[position], None, None, hit.score))
                continue
            message = stored.get((unit_id, position))
            if message is not None and message.content:  # else forgotten meanwhile
                found.append(RecalledMessage(message, unit_id, position, hit.score))
        found = _once(found)[:k]
        for recalled in found:
            at = recalled.position
            if recalled.unit_id is None or at is None:
                continue
            unit_id = recalled.unit_id
            for memory_slice in unit_slices[unit_id].values():
                if memory_slice.start_index <= at < memory_slice.end_index:
                    slices.setdefault(
                        (unit_id, memory_slice.id), RecalledSlice(unit_id, memory_slice)
                    )
        return RecallResult(query, found, list(slices.values()), bounds)


def _once(found: list[RecalledMessage]) -> list[RecalledMessage]:
    """Each message once: one held in the window and stored is found twice; it keeps
    the better place, as the stored copy (with its unit)."""
    seen: dict[str, int] = {}
    kept: list[RecalledMessage] = []
    for recalled in found:
        before = seen.get(recalled.message.id)
        if before is None:
            seen[recalled.message.id] = len(kept)
            kept.append(recalled)
        elif recalled.unit_id is not None:
            kept[before] = replace(recalled, score=kept[before].score)
    return kept


def _named_speaker(query: str, speakers: Sequence[str], window: Sequence[Doc]) -> str | None:
    """The one participant `query` names as a word, or None (none, or several)."""
    words = set(re.findall(r"[^\W_]+", query.lower()))
    known = dict.fromkeys([*speakers, *(d.speaker.lower() for d in window if d.speaker)])
    named = [s for s in known if s in words]
    return named[0] if len(named) == 1 else None


def _runs(positions: list[int]) -> list[list[int]]:
    """Hit positions grouped where they lie close together: each run is read as one
    range, so the hits of a large unit cost their own rows, not the span between them."""
    runs: list[list[int]] = []
    for position in sorted(set(positions)):
        if runs and position - runs[-1][-1] <= RUN_GAP:
            runs[-1].append(position)
        else:
            runs.append([position])
    return runs


_PHASES = (
    (INDEX_MS, {PHASE: "index"}),
    (ENGINE_MS, {PHASE: "engine"}),
    (READ_MS, {PHASE: "read"}),
)


def _phases(*marks: float) -> None:
    """Where a recall's time went - bringing this host's index up to the database (and
    reading the window), the engine's search, reading the hits' messages and slices -
    on the current span and in `partner_memory.recall.duration`."""
    histogram = instruments().recall_duration
    current = trace.get_current_span()
    for (attribute, labels), start, end in zip(_PHASES, marks, marks[1:], strict=False):
        histogram.record(end - start, labels)
        current.set_attribute(attribute, round((end - start) * 1000, 3))
