"""Forgetting: a message's text, a unit or a namespace leaves every path at once.

The slices that held forgotten messages are summarised again from what
remains (by the service's summariser, before the forgetting transaction, so
no lock waits for an LLM); the store then blanks, deletes and records it all
in one transaction (`ForgetStore`).
"""

from __future__ import annotations

from collections.abc import Sequence

from partner_memory.clock import Clock, system_clock
from partner_memory.errors import InvalidInputError, NotFoundError
from partner_memory.model import check_text
from partner_memory.rolling import MessageCompressor, RollingSettings, SummarizerChain, UsageMeter
from partner_memory.store.contract.base import MemoryStore
from partner_memory.store.contract.capabilities import (
    FORGETTING,
    ForgetStore,
    Located,
    MessagesForget,
    Resummary,
    require,
)


class Forgetting:
    """The forget verbs of a service, over a store that offers `ForgetStore`."""

    def __init__(
        self,
        store: MemoryStore,
        summarizer: SummarizerChain,
        compressor: MessageCompressor,
        settings: RollingSettings,
        *,
        clock: Clock = system_clock,
    ) -> None:
        self._store = store
        self._summarizer = summarizer
        self._compressor = compressor
        self._settings = settings
        self._clock = clock

    @property
    def _forgets(self) -> ForgetStore:
        return require(self._store, FORGETTING)

    def messages(self, namespace: str, message_ids: Sequence[str]) -> int:
        ids = list(dict.fromkeys(message_ids))
        if not ids:
            raise InvalidInputError("no message to forget")
        for given in ids:
            check_text(given, "message id")
        forgets = self._forgets
        located = forgets.locate_messages(namespace, ids)
        resummaries = self._resummaries(namespace, located)
        return forgets.forget_messages(namespace, MessagesForget(ids, resummaries, self._clock()))

    def slice(self, namespace: str, unit_id: str, slice_id: str) -> int:
        found = self._store.get_slice(namespace, unit_id, slice_id)
        if found is None:
            raise NotFoundError(f"slice {slice_id!r} not found in unit {unit_id!r}")
        covered = self._store.read_messages(namespace, unit_id, found.start_index, found.end_index)
        if not covered:
            return 0
        return self.messages(namespace, [m.id for m in covered])

    def unit(self, namespace: str, unit_id: str) -> None:
        self._forgets.forget_unit(namespace, unit_id, at=self._clock())

    def namespace(self, namespace: str) -> None:
        self._forgets.forget_namespace(namespace, at=self._clock())

    def purge(self) -> list[str]:
        return self._forgets.purge()

    def _resummaries(self, namespace: str, located: Sequence[Located]) -> list[Resummary]:
        gone: dict[str, set[int]] = {}
        for place in located:
            gone.setdefault(place.unit_id, set()).add(place.position)
        changes: list[Resummary] = []
        for unit_id, positions in gone.items():
            for held in self._store.read_slices(namespace, unit_id):
                if not any(held.start_index <= p < held.end_index for p in positions):
                    continue
                kept = [
                    m
                    for offset, m in enumerate(
                        self._store.read_messages(
                            namespace, unit_id, held.start_index, held.end_index
                        )
                    )
                    if held.start_index + offset not in positions and m.content
                ]
                if not kept:
                    changes.append(Resummary(unit_id, held.id, "", "forgotten"))
                    continue
                meter = UsageMeter(budget_s=self._settings.llm_budget_s)
                summary = self._summarizer.summarize(self._compressor.compress(kept, meter), meter)
                changes.append(Resummary(unit_id, held.id, summary.text, summary.summarizer))
        return changes
