"""Blocks a namespace holds in its context as they are - brought in from another memory
system (a Letta agent's core memory) - beside the summaries rolling writes.

They are kept as one item of the namespace (`HELD_BLOCKS_KEY`, the blocks as JSON),
so the database stays their authority, every process reads the same ones, and
forgetting the namespace removes them; the context reads them with its slices and
activation, in one transaction (`ContextState.held`). Each is a block named by its label in the
memory and communication domains, at the full score, never fading: the system they
came from kept them in every prompt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from partner_memory import json_text
from partner_memory.context import ContextBlock, Domain
from partner_memory.errors import InvalidInputError
from partner_memory.items import Items
from partner_memory.model import check_text
from partner_memory.store.contract.capabilities import HELD_BLOCKS_KEY, StoredItem

#: The longest block kept, in characters (a Letta block's default limit is 5,000 to
#: 20,000 characters; a prompt holds a few of them).
MOST_CHARS = 50_000


@dataclass(frozen=True, slots=True)
class HeldBlock:
    """A block to keep in context: its label (the XML element's name), its text, and
    the system it came from (the element's `source`)."""

    label: str
    value: str
    source: str

    def __post_init__(self) -> None:
        for name in ("label", "value", "source"):
            check_text(getattr(self, name), f"block {name}")
        if not self.label.strip():
            raise InvalidInputError("a block needs a label")
        if len(self.value) > MOST_CHARS:
            raise InvalidInputError(
                f"block {self.label!r} holds {len(self.value):,} characters"
                f" (at most {MOST_CHARS:,})"
            )

    def to_dict(self) -> dict[str, str]:
        return {"label": self.label, "value": self.value, "source": self.source}

    def as_context(self) -> ContextBlock:
        return ContextBlock(
            name=self.label,
            source=self.source,
            full=self.value,
            domains=frozenset({Domain.MEMORY, Domain.COMMUNICATION}),
        )


def hold_blocks(items: Items, namespace: str, blocks: Sequence[HeldBlock], *, now: int) -> bool:
    """Keep `blocks` as the namespace's held blocks (replacing those it held); False when
    it held exactly these already, so holding them again writes nothing."""
    value = json.dumps([b.to_dict() for b in blocks], ensure_ascii=False)
    held = items.get(namespace, [HELD_BLOCKS_KEY], now=now)
    if held and held[0].value == value:
        return False
    items.put(StoredItem(namespace, HELD_BLOCKS_KEY, value, now, now))
    return True


def held_blocks(held: str | None) -> list[HeldBlock]:
    """The blocks of a namespace's held-blocks item (`ContextState.held`)."""
    return [] if held is None else [HeldBlock(**b) for b in json_text.loads(held)]
