"""The durable consumer that keeps the recall index's rows: one per stored message.

It follows the rolling log like any durable consumer, so its rows and its
position commit together: a crash between a rolling and its indexing only
delays the rows, and a search meanwhile reads the rolling from the log.
Messages are analysed and embedded before the transaction (`prepare`), so
an embeddings endpoint is never waited for with a lock held.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from partner_memory.model import LogEntry
from partner_memory.recall.analyze import RecallAnalysis
from partner_memory.rolling.consumers import PreparedWork
from partner_memory.store.base import LogTransaction
from partner_memory.store.sql_base import values_clause
from partner_memory.store.sql_recall import RECALL_COLUMNS, RECALL_CONFLICT

#: The consumer's name in the `consumers` table; the index's position is kept under it.
RECALL_CONSUMER = "recall"
#: Rows per INSERT (8 parameters each, well below every driver's limit).
ROWS_PER_STATEMENT = 500

log = logging.getLogger(__name__)


def stored_unit(tx: LogTransaction, entry: LogEntry) -> tuple[int, int, str | None] | None:
    """The rolling's unit as recall's consumers write beside it: its key, its namespace's
    key and the namespace's embedder; None if the unit was forgotten since."""
    found = tx.execute(
        "SELECT u.pk, u.namespace_id, n.recall_embedder FROM units u JOIN namespaces n"
        " ON n.id = u.namespace_id WHERE n.name = ? AND u.unit_id = ?",
        (entry.namespace, entry.unit.id),
    )
    if not found:
        return None
    unit_pk, namespace_id, embedder = found[0]
    return int(unit_pk), int(namespace_id), embedder


class RecallIndexer:
    """`DurableConsumer` writing `recall_docs` (the table comes with the schema)."""

    name = RECALL_CONSUMER

    def __init__(self, analysis: RecallAnalysis) -> None:
        self.analysis = analysis
        self._words_only = RecallAnalysis(None)
        self._warned: set[str] = set()
        self._prepared = PreparedWork(lambda entry: analysis.rows(entry.messages))

    def prepare(self, entries: Sequence[LogEntry]) -> None:
        self._prepared.prepare(entries)

    def setup(self, tx: LogTransaction) -> None:
        """Nothing to create: the schema's migrations made the table."""

    def apply(self, tx: LogTransaction, entry: LogEntry) -> None:
        found = stored_unit(tx, entry)
        if found is None:  # the unit is gone (forgotten since): nothing to index
            return
        unit_pk, namespace_id, embedder = found
        own = self.analysis.embedder_name
        if embedder is None:  # the namespace's first rows: its vectors are ours
            tx.execute(
                "UPDATE namespaces SET recall_embedder = ? WHERE id = ?", (own, namespace_id)
            )
            embedder = own
        if embedder == own:
            analysed = self._prepared.take(entry)
        else:
            analysed = self._words_only.rows(entry.messages)
            if entry.namespace not in self._warned:
                self._warned.add(entry.namespace)
                log.warning(
                    "namespace %r holds vectors of %s, this service embeds with %s: new"
                    " messages are indexed by words only until `partner-memory reindex`",
                    entry.namespace,
                    embedder,
                    own,
                )
        first = entry.slice.start_index
        rows: list[object] = []
        for offset, (message, (speaker, terms, vector)) in enumerate(
            zip(entry.messages, analysed, strict=True)
        ):
            rows += (unit_pk, first + offset, namespace_id, entry.seq, speaker, message.timestamp)
            rows += (terms, vector)
        width = len(RECALL_COLUMNS.split(", "))
        for start in range(0, len(entry.messages), ROWS_PER_STATEMENT):
            count = min(ROWS_PER_STATEMENT, len(entry.messages) - start)
            tx.execute(
                f"INSERT INTO recall_docs ({RECALL_COLUMNS}) VALUES "
                + values_clause(count, width)
                + RECALL_CONFLICT,
                rows[start * width : (start + count) * width],
            )
