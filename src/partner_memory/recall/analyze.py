"""Text to index terms, the same for what is stored and what is asked.

English words are lower-cased, stop words dropped and Snowball-stemmed
("hiking", "hikes" -> "hike"); runs of Chinese characters are segmented
into words (jieba); numbers are kept. A message's date is indexed as words
too ("8 may 2023"), so "in May" finds what was said in May. Analysis
happens in Python, so every backend indexes exactly the same terms.

A message's first `INDEXED_CHARS` are read for words (and, by the embedder,
its first `EMBED_MESSAGE_CHARS` for meaning); the message itself is stored
whole. A message the embedder cannot take is indexed by words only and
logged: it never stops the indexer nor fails a search.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache, lru_cache
from itertools import chain
from typing import TYPE_CHECKING

from partner_memory.ascii_text import alnum_runs
from partner_memory.errors import EmbeddingRejected, LLMError
from partner_memory.model import Message
from partner_memory.recall.embed import (
    EMBED_MESSAGE_CHARS,
    NO_EMBEDDER,
    Embedder,
    EmbeddingSettings,
    StaticEmbedder,
    embed_bounded,
    pack,
)
from partner_memory.recall.encoder import EncoderEmbedder
from partner_memory.said_dates import pointed_dates
from partner_memory.store.contract.staged import RecallRow

if TYPE_CHECKING:
    from concurrent.futures import Future

    import Stemmer

    from partner_memory.recall.analysis_worker import AnalysisWorker, WorkerSpec

log = logging.getLogger(__name__)

#: Messages of bulk work that start the analysis worker (`RecallAnalysis.bulk`): about
#: half a second of ingest, about the time the worker takes to start and load its model.
WORKER_MIN_MESSAGES = 5_000

#: Messages per batch `RecallAnalysis.prefetch` hands the worker: big enough that a
#: batch's pickling and pipe round trip are a small part of it.
PREFETCH_BATCH = 512
#: Prefetched rows not yet taken, at most (~16 MB): an index trailing far behind the
#: replay stops the prefetch rather than fill memory.
PREFETCH_HELD = 32_768

#: Characters of a message read for its words (~15,000 words, a long pasted document).
INDEXED_CHARS = 100_000

#: Latin words and numbers, or runs of CJK ideographs.
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further get got had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves
    的 了 和 是 在 我 你 他 她 它 我们 你们 他们 这 那 就 也 都 吗 呢 吧 啊""".split()
)


@cache
def _stemmer() -> Stemmer.Stemmer:
    import Stemmer  # imported on first use: commands that never search do not pay for it

    return Stemmer.Stemmer("english")


def _cjk_words(run: str) -> list[str]:
    import rjieba  # imported on first use, as in the offline summariser

    return [w for w in rjieba.cut(run) if w.strip()]


def terms(text: str) -> list[str]:
    """The index terms of `text`, in order, repeats kept (they count)."""
    lowered = text.lower()
    # an ASCII text's tokens are its runs of [a-z0-9]: cut in C, not matched
    tokens = alnum_runs(lowered) if lowered.isascii() else _TOKEN.findall(lowered)
    return list(chain.from_iterable(map(_token_terms, tokens)))


@lru_cache(maxsize=1 << 17)
def _token_terms(token: str) -> tuple[str, ...]:
    """The terms of one lower-cased token. Words recur across messages (an ingest
    analyses tens of thousands a second): each is stemmed or segmented once."""
    if token.isascii() or not _CJK.search(token):
        if token in STOP_WORDS:
            return ()
        return (token if token.isdigit() else _stemmer().stemWord(token),)
    found: list[str] = []
    for part in re.split(f"({_CJK.pattern})", token):
        if not part:
            continue
        pieces = _cjk_words(part) if _CJK.fullmatch(part) else [part]
        found += (w for w in pieces if w not in STOP_WORDS)
    return tuple(found)


def date_terms(ms: int | None) -> list[str]:
    """A time as the words a question about it uses: day, month and year ("8 may 2023")."""
    if ms is None:
        return []
    return list(_day_terms(ms // 86_400_000))


@lru_cache(maxsize=4096)
def _day_terms(day: int) -> tuple[str, ...]:
    moment = datetime.fromtimestamp(day * 86_400, tz=UTC)
    return tuple(terms(moment.strftime("%-d %B %Y")))


def speaker_of(message: Message) -> str | None:
    """Who said it: the transcript's speaker, else the name in its source marker
    (`[USER: Mei]` -> Mei, `[Caroline]` -> Caroline); None for the agent itself."""
    speaker = message.speaker
    named = message.metadata.get("speaker")
    if speaker == "AGENT" and not (isinstance(named, str) and named.strip() == "AGENT"):
        return None
    return speaker


def message_terms(message: Message) -> tuple[str | None, list[str]]:
    """A message as the index sees it: its speaker, and the terms of its text (marker
    included), of its date, and of the dates it points to ("yesterday")."""
    text = message.content[:INDEXED_CHARS]
    said = date_terms(message.timestamp)
    # what "yesterday" adds to the day it was said ("7", not "may 2023" again: measured
    # on LoCoMo dev, repeating the month and year cost multi-hop questions 0.3 points)
    pointed = [t for t in terms(" ".join(pointed_dates(text, message.timestamp))) if t not in said]
    return speaker_of(message), terms(text) + said + pointed


def analyze(message: Message) -> tuple[str | None, str]:
    """`message_terms` as the recall rows store them: terms space-separated."""
    speaker, words = message_terms(message)
    return speaker, " ".join(words)


class RecallAnalysis:
    """Messages to recall rows: terms as above, and vectors from the embedder (if any),
    made in one batch. The indexer, reindex, imports and copies all use one."""

    def __init__(self, embedder: Embedder | None, *, worker: bool = True) -> None:
        self.embedder = embedder
        #: whether `bulk` may hand rows to a worker process (`analysis_worker`)
        self.worker = worker
        self._bulk = 0
        self._bulk_lock = threading.Lock()
        #: rows `prefetch` started, by message id: (the message, its batch, its place)
        self._early: dict[str, tuple[Message, Future[list[RecallRow]], int]] = {}

    @contextmanager
    def bulk(self, messages: int | None = None) -> Iterator[None]:
        """While open, rows may be made by this process's analysis worker on another
        core (`analysis_worker`): for bulk work, such as an ingest, that would
        otherwise take turns with its own replay for the GIL. An embeddings endpoint
        is waited for without the GIL already, so it is never handed over. The worker
        is started once this job, or this process's bulk work so far, holds
        `WORKER_MIN_MESSAGES` messages (or an unknown number): starting and loading its
        model and the summariser's segmenter takes it about 0.5 s, longer than fewer
        take here."""
        spec = self._worker_spec()
        with self._bulk_lock:
            outermost = not self._bulk  # an inner job is part of the outer one's count
            self._bulk += 1
        try:
            if spec is not None and outermost:
                from partner_memory.recall.analysis_worker import shared_worker, worth_a_worker

                if worth_a_worker(messages, WORKER_MIN_MESSAGES):
                    shared_worker(spec)  # starting now, it has loaded when rows are due
            yield
        finally:
            with self._bulk_lock:
                self._bulk -= 1
                if not self._bulk:
                    self._early.clear()  # prefetched for messages never stored

    @property
    def hands_over(self) -> bool:
        """Whether rows may be made by a worker now (`bulk`, and one started for this
        embedder)."""
        return self._worker() is not None

    def _worker(self) -> AnalysisWorker | None:
        spec = self._worker_spec()
        if not self._bulk or spec is None:
            return None
        from partner_memory.recall.analysis_worker import running_worker

        return running_worker(spec)

    def _live_worker(self, messages: int) -> AnalysisWorker | None:
        spec = self._worker_spec()
        if spec is None:
            return None
        from partner_memory.recall.analysis_worker import live_worker

        return live_worker(spec, messages)

    def _worker_spec(self) -> WorkerSpec | None:
        if not self.worker:
            return None
        if self.embedder is None:
            return ("none",)
        if type(self.embedder) is StaticEmbedder:
            return ("static", self.embedder.dimensions)
        if type(self.embedder) is EncoderEmbedder:
            return ("encoder", self.embedder.model)
        return None

    @property
    def embedder_name(self) -> str:
        return self.embedder.name if self.embedder is not None else NO_EMBEDDER

    @property
    def reads_sentences(self) -> bool:
        """Whether the embedder reads a sentence's meaning (an encoder, an endpoint) rather
        than averaging its words' vectors (the static model): `Search.lead_all`."""
        return self.embedder is not None and type(self.embedder) is not StaticEmbedder

    def warm(self) -> None:
        """Load the embedder now rather than in the first request that needs it."""
        if self.embedder is not None:
            self.embedder.warm()

    def rows(self, messages: Sequence[Message]) -> list[RecallRow]:
        """One row per message. Raises `LLMError` only when the embeddings endpoint is
        unreachable (worth retrying); what it refuses, or the model fails on, gets no vector."""
        _warn_long(messages)
        analysed = [analyze(m) for m in messages]
        vectors = self._vectors(messages)
        return [(s, t, v) for (s, t), v in zip(analysed, vectors, strict=True)]

    def rows_later(self, messages: Sequence[Message]) -> Callable[[], list[RecallRow]] | None:
        """`rows(messages)` started in the worker: how to get them (made here if the
        worker fails). None when there is no worker to start them in: outside `bulk`,
        one that a service's rollings have started (`analysis_worker.live_worker`)."""
        if not messages:
            return None
        worker = self._worker() if self._bulk else self._live_worker(len(messages))
        if worker is None:
            return None
        places = self._prefetched(messages)
        if places is None:
            future = worker.submit(messages)
            if future is None:
                return None
            places = [(future, i) for i in range(len(messages))]
        from partner_memory.recall.analysis_worker import WorkerFailed

        def result() -> list[RecallRow]:
            try:
                # each batch's answer, asked once
                batches = {f: f.result() for f in dict.fromkeys(f for f, _ in places)}
                made = [batches[future][i] for future, i in places]
            except WorkerFailed:
                return self.rows(messages)
            self._said(messages, made)
            return made

        return result

    def prefetch(self, messages: Sequence[Message]) -> bool:
        """Within `bulk`, start the rows of messages about to be stored in the worker
        now, so the index has them when their rolling commits instead of trailing the
        replay. A stored message takes them only if it is the same (id, role, content,
        time, metadata): rows are a function of those alone. False when no worker is
        ready to take them, or `PREFETCH_HELD` rows wait to be taken already."""
        worker = self._worker()
        if worker is None or not worker.wait_ready(0) or len(self._early) >= PREFETCH_HELD:
            return False
        for start in range(0, len(messages), PREFETCH_BATCH):
            batch = messages[start : start + PREFETCH_BATCH]
            future = worker.submit(batch)
            if future is None:
                return False
            with self._bulk_lock:
                if not self._bulk:
                    return False
                self._early.update((m.id, (m, future, i)) for i, m in enumerate(batch))
        # let the thread sending them take the GIL now, rather than after this thread's
        # switch interval: the worker would wait that long (5 ms) for its first batch
        time.sleep(0)
        return True

    def _prefetched(
        self, messages: Sequence[Message]
    ) -> list[tuple[Future[list[RecallRow]], int]] | None:
        """Where `prefetch` started the rows of `messages` (batch, place), if it started
        them all."""
        with self._bulk_lock:
            if not self._early:
                return None
            early = [self._early.pop(m.id, None) for m in messages]
        places = []
        for message, found in zip(messages, early, strict=True):
            if found is None or _analysed(found[0]) != _analysed(message):
                return None
            places.append(found[1:])
        return places

    def _said(self, messages: Sequence[Message], made: list[RecallRow]) -> None:
        """What `rows` would have logged (the worker logs nothing)."""
        _warn_long(messages)
        if self.embedder is None:
            return
        for message, (_, _, vector) in zip(messages, made, strict=True):
            if vector is None:
                log.warning(
                    "message %s is indexed by words only: the embedder failed on it", message.id
                )

    def _vectors(self, messages: Sequence[Message]) -> list[bytes | None]:
        if self.embedder is None or not messages:
            return [None] * len(messages)
        try:
            return list(pack(embed_bounded(self.embedder, [m.content for m in messages])))
        except LLMError as exc:
            if not isinstance(exc, EmbeddingRejected):
                raise
            failure: Exception = exc
        except Exception as exc:  # the model failed on these texts (MemoryError included)
            failure = exc
        if len(messages) == 1:
            log.warning(
                "message %s is indexed by words only: the embedder failed on it: %s: %s",
                messages[0].id,
                type(failure).__name__,
                failure,
            )
            return [None]
        return [v for m in messages for v in self._vectors([m])]


def _analysed(message: Message) -> tuple[object, ...]:
    """What a message's rows are made from (its id aside)."""
    return (message.role, message.content, message.timestamp, message.metadata)


def _warn_long(messages: Sequence[Message]) -> None:
    """Say which messages recall reads only the start of."""
    for message in messages:
        if len(message.content) > INDEXED_CHARS:
            log.warning(
                "message %s is %d characters: recall reads its first %d for words"
                " and %d for meaning",
                message.id,
                len(message.content),
                INDEXED_CHARS,
                EMBED_MESSAGE_CHARS,
            )


def default_analysis() -> RecallAnalysis:
    """With the embedder the environment chooses (`EmbeddingSettings.from_env`)."""
    return RecallAnalysis(EmbeddingSettings.from_env().embedder())
