"""R16: which messages of a snapshot are not yet stored in the current unit."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from partner_memory.model import Message


def by_id(message: Message) -> Hashable:
    return message.id


def by_content(message: Message) -> Hashable:
    """The reference's rule, for messages whose ids cannot be trusted to match."""
    return (message.role, message.content)


def resolve_increment(
    unit_tail: Sequence[Message],
    snapshot: Sequence[Message],
    *,
    key: Callable[[Message], Hashable] = by_id,
) -> list[Message]:
    """The snapshot after the longest suffix of the unit that equals a prefix of it.

    With stable ids (the default key) a repeated "ok" cannot match by
    accident, as it can under the reference's content equality.
    """
    tail_keys = [key(m) for m in unit_tail]
    snap_keys = [key(m) for m in snapshot]
    for k in range(min(len(tail_keys), len(snap_keys)), 0, -1):
        if tail_keys[-k:] == snap_keys[:k]:
            return list(snapshot[k:])
    return list(snapshot)
