"""R22-R23: the workspace that holds context blocks and resolves them for a set of domains."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from partner_memory.clock import Clock
from partner_memory.context.block import (
    BELOW,
    COMPACT_AT,
    FULL_AT,
    INITIAL_SCORE,
    ContextBlock,
    Domain,
    Exposure,
    Level,
    Urgency,
)
from partner_memory.errors import InvalidInputError
from partner_memory.model import Record

#: R23 activation multipliers by (exposure, level before activation).
_GAIN = {
    (Exposure.PRIMARY, Level.FULL): 1.0,
    (Exposure.PRIMARY, Level.COMPACT): 0.6,
    (Exposure.PRIMARY, Level.ABSTRACT): 0.6,
    (Exposure.SECONDARY, Level.FULL): 0.0,
    (Exposure.SECONDARY, Level.COMPACT): 0.2,
    (Exposure.SECONDARY, Level.ABSTRACT): 0.1,
}
#: R23 ceilings: activation never lifts a block past these from its starting level.
_CEILING = {
    (Exposure.PRIMARY, Level.FULL): INITIAL_SCORE,
    (Exposure.PRIMARY, Level.COMPACT): INITIAL_SCORE,
    (Exposure.PRIMARY, Level.ABSTRACT): FULL_AT - BELOW,
    (Exposure.SECONDARY, Level.FULL): INITIAL_SCORE,
    (Exposure.SECONDARY, Level.COMPACT): FULL_AT - BELOW,
    (Exposure.SECONDARY, Level.ABSTRACT): COMPACT_AT - BELOW,
}


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One change of the workspace, for inspecting why context looks as it does."""

    at: int
    action: str  # registered, replaced, faded, activated, removed, expired
    name: str
    source: str
    score: float


@dataclass(frozen=True, slots=True)
class ResolvedBlock(Record):
    """A block (or several with one source key, merged) as a resolve exposes it."""

    name: str
    source: str
    urgency: Urgency
    exposure: Exposure
    score: float
    snapshot: str
    history: tuple[str, ...] = ()


class ContextWorkspace:
    """Holds context blocks; thread-safe; time comes from the injected clock."""

    def __init__(self, clock: Clock, *, trace_size: int = 1000) -> None:
        self._clock = clock
        self._blocks: list[ContextBlock] = []
        self._lock = threading.Lock()
        self._trace: deque[TraceEvent] = deque(maxlen=trace_size)

    def _note(self, action: str, block: ContextBlock, now: int) -> None:
        self._trace.append(TraceEvent(now, action, block.name, block.source, block.score))

    @property
    def trace(self) -> list[TraceEvent]:
        with self._lock:
            return list(self._trace)

    @property
    def blocks(self) -> list[ContextBlock]:
        with self._lock:
            return list(self._blocks)

    def register(self, block: ContextBlock) -> None:
        """R22: same-source-key blocks lose their replace-fade; the new one is always added."""
        now = self._clock()
        with self._lock:
            for old in [b for b in self._blocks if b.source_key == block.source_key]:
                old.score -= old.replace_fade
                self._note("replaced", old, now)
                if old.score <= 0:
                    self._blocks.remove(old)
                    self._note("removed", old, now)
            block.touched_at = now
            block.made_at = block.made_at or now
            self._blocks.append(block)
            self._note("registered", block, now)

    def expire(self, name: str, source: str) -> int:
        """Remove every block of a source key; returns how many."""
        now = self._clock()
        with self._lock:
            gone = [b for b in self._blocks if b.source_key == (name, source)]
            for block in gone:
                self._blocks.remove(block)
                self._note("expired", block, now)
            return len(gone)

    def _decay(self, block: ContextBlock, now: int) -> bool:
        """Time fade, per elapsed second; False when the block has faded out."""
        elapsed_s = max(0, now - block.touched_at) / 1000
        block.touched_at = max(block.touched_at, now)
        if elapsed_s and block.time_fade_per_minute:
            block.score -= block.time_fade_per_minute * elapsed_s / 60
            self._note("faded", block, now)
        return block.score > 0

    def resolve(self, domains: Sequence[Domain | str]) -> list[ResolvedBlock]:
        """R23 as the reference runs it: decay, expose and activate, then order.

        Resolving changes the blocks (exposure lifts their scores); a namespace's
        own context is resolved with `resolve_blocks`, which reads only.
        """
        wanted = _domains(domains)
        now = self._clock()
        with self._lock:
            for block in list(self._blocks):
                if not self._decay(block, now):
                    self._blocks.remove(block)
                    self._note("removed", block, now)
                    continue
                exposure = _exposure(block, wanted)
                if exposure is None:
                    continue
                before = block.level
                gain = block.activate * _GAIN[(exposure, before)]
                if gain:
                    ceiling = _CEILING[(exposure, before)]
                    block.score = max(block.score, min(block.score + gain, ceiling))
                    self._note("activated", block, now)
            blocks = list(self._blocks)
        return resolve_blocks(blocks, wanted)


def _domains(domains: Sequence[Domain | str]) -> list[Domain]:
    if isinstance(domains, str) or not isinstance(domains, Sequence):
        raise InvalidInputError(f"domains must be a list of domains, got {type(domains).__name__}")
    known = ", ".join(Domain)
    unknown = [d for d in domains if d not in set(Domain)]
    if unknown:
        raise InvalidInputError(f"unknown domain {unknown[0]!r}: one of {known}")
    wanted = [Domain(d) for d in domains]
    if not wanted:
        raise InvalidInputError("resolve needs at least one domain")
    return wanted


def _exposure(block: ContextBlock, wanted: Sequence[Domain]) -> Exposure | None:
    if not block.domains.intersection(wanted):
        return None
    return Exposure.PRIMARY if wanted[0] in block.domains else Exposure.SECONDARY


def _text(block: ContextBlock, exposure: Exposure) -> str:
    level = block.level
    if exposure is Exposure.PRIMARY:
        return block.rendering(Level.FULL if level is Level.FULL else Level.COMPACT)
    return block.rendering(Level.ABSTRACT if level is Level.ABSTRACT else Level.COMPACT)


def resolve_blocks(
    blocks: Sequence[ContextBlock], domains: Sequence[Domain | str]
) -> list[ResolvedBlock]:
    """R23's exposure, rendering, order and merge over blocks as they are - a pure read.

    Order: summed domain weight, score, name, source; between equal scores the
    newer block (`made_at`, then later in `blocks`) comes first, so with one
    source key the newest of equal blocks is the `<snapshot>`.
    """
    wanted = _domains(domains)
    weight: dict[Domain, int] = {}
    for i, domain in enumerate(wanted):
        weight.setdefault(domain, len(wanted) - i)
    ranked: list[tuple[tuple[float, float, str, str, int, int], ContextBlock, Exposure]] = []
    for index, block in enumerate(blocks):
        exposure = _exposure(block, wanted)
        if exposure is None or block.score <= 0:
            continue
        summed = sum(weight[d] for d in block.domains.intersection(wanted))
        key = (-summed, -block.score, block.name, block.source, -block.made_at, -index)
        ranked.append((key, block, exposure))
    ranked.sort(key=lambda r: r[0])
    return _merge([(block, exposure, _text(block, exposure)) for _, block, exposure in ranked])


def _merge(chosen: list[tuple[ContextBlock, Exposure, str]]) -> list[ResolvedBlock]:
    """Blocks sharing a source key become one, the best-scoring text as the snapshot
    (the first of equals, which `resolve_blocks` made the newest)."""
    groups: dict[tuple[str, str], list[tuple[ContextBlock, Exposure, str]]] = {}
    for block, exposure, text in chosen:
        groups.setdefault(block.source_key, []).append((block, exposure, text))
    resolved = []
    for (name, source), members in groups.items():
        best = max(members, key=lambda m: m[0].score)
        resolved.append(
            ResolvedBlock(
                name=name,
                source=source,
                urgency=max((m[0].urgency for m in members), key=_URGENCY_ORDER.index),
                exposure=best[1],
                score=best[0].score,
                snapshot=best[2],
                history=tuple(m[2] for m in members if m is not best),
            )
        )
    return resolved


_URGENCY_ORDER = [Urgency.LOW, Urgency.NORMAL, Urgency.HIGH, Urgency.CRITICAL]
