"""A namespace's context, derived from the database - the same in every process.

The blocks an agent's prompt receives are a function of what the store holds
(the newest slices, the latest recall's activation) and the clock: not of
which process asks, how often it asked or when it started. Reading never
changes them; a restart changes nothing; a forget removes what it forgot
and moves nothing else.

- `dialog_history` (R19): one block per slice of the newest
  `RollingSettings.restore_slices`, the newest scoring 100 and each older one
  `replace_fade` less (R22: every later rolling replaced it once) - full,
  full, compact, compact, abstract with the defaults. A slice whose summary
  was forgotten shows nothing, and the older ones keep their places.
- `activated_memory_slices`: what the latest recall found (recall's
  `activate`), fading by `time_fade_per_minute` from the search (R21); the
  next recall replaces it, a forget of anything it quotes removes it.

Where this departs from the reference, and why: its workspace lived in process
memory and every resolve added R23's exposure gain, which lifted every block
of a source key to one ceiling, so ties - kept in registration order - made
the oldest summary the `<snapshot>` after a few reads; and time fade measured
from when a process happened to register a block. Here a resolve only reads,
the newest summary is the snapshot, and a summary does not fade by time while
the agent is away (the reference's own reads cancel time fade while it talks:
R23 adds `activate`, 10, per read against 5 a minute): yesterday's summary is
in this morning's first prompt, in any process.
"""

from __future__ import annotations

from collections.abc import Sequence

from partner_memory.clock import Clock
from partner_memory.context import ContextBlock, Domain, ResolvedBlock
from partner_memory.context.block import INITIAL_SCORE
from partner_memory.context.workspace import resolve_blocks
from partner_memory.held_blocks import held_blocks
from partner_memory.model import Activation, ContextState
from partner_memory.recall.context import activated_block, recall_block
from partner_memory.recall.results import RecallResult
from partner_memory.rolling.dialog_rolling import dialog_history_block
from partner_memory.rolling.settings import RollingSettings
from partner_memory.store.contract.base import MemoryStore


def memory_blocks(state: ContextState, now: int, settings: RollingSettings) -> list[ContextBlock]:
    """The namespace's blocks at `now`, each with its score; faded-out ones left out."""
    blocks = []
    for rank, (unit_id, memory_slice) in enumerate(state.slices):
        score = INITIAL_SCORE - settings.replace_fade * rank
        if memory_slice.summary and score > 0:
            block = dialog_history_block(unit_id, memory_slice, settings)
            block.score, block.made_at = score, memory_slice.timestamp
            blocks.append(block)
    held = state.activation
    if held is not None:
        minutes = max(0, now - held.at) / 60_000
        score = INITIAL_SCORE - settings.time_fade_per_minute * minutes
        if score > 0:
            blocks.append(
                recall_block(
                    held.full, held.compact, held.abstract, settings, score=score, made_at=held.at
                )
            )
    return blocks


def activation_of(found: RecallResult, at: int, settings: RollingSettings) -> Activation | None:
    """What a recall leaves in context (None: it found nothing)."""
    block = activated_block(found, settings)
    if block is None:
        return None
    return Activation(
        at=at,
        full=block.full,
        compact=block.compact,
        abstract=block.abstract,
        message_ids=tuple(dict.fromkeys(hit.message.id for hit in found.hits)),
        slices=tuple((held.unit_id, held.slice.id) for held in found.slices),
    )


class NamespaceContext:
    """The context of one namespace, read from the store each time it is asked for."""

    def __init__(
        self, store: MemoryStore, namespace: str, settings: RollingSettings, clock: Clock
    ) -> None:
        self._store = store
        self._namespace = namespace
        self._settings = settings
        self._clock = clock

    def blocks(self) -> list[ContextBlock]:
        state = self._store.context_state(self._namespace, slices=self._settings.restore_slices)
        found = memory_blocks(state, self._clock(), self._settings)
        return found + [block.as_context() for block in held_blocks(state.held)]

    def resolve(self, domains: Sequence[Domain | str]) -> list[ResolvedBlock]:
        """R23's order and merge for these domains; a read, changing nothing."""
        return resolve_blocks(self.blocks(), domains)

    def activate(self, found: RecallResult) -> bool:
        """Leave what a recall found in the context (replacing the previous recall's);
        False where nothing changes (found nothing, or the store is read-only)."""
        activation = activation_of(found, self._clock(), self._settings)
        if activation is None or self._store.read_only:
            return False
        self._store.set_activation(self._namespace, activation)
        return True
