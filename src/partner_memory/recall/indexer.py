"""The durable consumer that keeps the recall index's rows: one per stored message.

It follows the rolling log like any durable consumer, so its rows and its
position commit together: a crash between a rolling and its indexing only
delays the rows, and a search meanwhile reads the rolling from the log.
Messages are analysed and embedded before the transaction (`prepare`), so
neither an embeddings endpoint nor the analysis worker (`analysis_worker`)
is waited for with a lock held; `apply` hands the rows to the store as
`IndexedMessages`.
"""

from __future__ import annotations

from collections.abc import Sequence

from partner_memory.model import LogEntry
from partner_memory.recall.analyze import RecallAnalysis
from partner_memory.rolling.consumers import FOLLOW_BATCH, FOLLOW_LOOKAHEAD, PreparedWork
from partner_memory.store.contract.staged import IndexedMessages, Staged

#: The consumer's name in the `consumers` table; the index's position is kept under it.
RECALL_CONSUMER = "recall"


class RecallIndexer:
    """`PreparingConsumer` staging each rolling's recall rows."""

    name = RECALL_CONSUMER

    def __init__(self, analysis: RecallAnalysis) -> None:
        self.analysis = analysis
        self._prepared = PreparedWork(
            lambda entry: analysis.rows(entry.messages),
            lambda entry: analysis.rows_later(entry.messages),
        )

    @property
    def lookahead(self) -> int:
        """Rollings to prepare ahead: with a worker (`RecallAnalysis.bulk`), the next
        batch is analysed there while this one is written; here, only what is applied."""
        return FOLLOW_LOOKAHEAD if self.analysis.hands_over else FOLLOW_BATCH

    def prepare(self, entries: Sequence[LogEntry]) -> None:
        self._prepared.prepare(entries)
        # the rows of the batch about to be written are waited for here, not under the lock
        self._prepared.settle(entries[:FOLLOW_BATCH])

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        return [IndexedMessages(self._prepared.take(entry), self.analysis.embedder_name)]
