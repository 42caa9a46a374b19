"""The refusals every backend makes, worded once: the SQL and in-memory backends raise
the same error with the same words for the same input."""

from __future__ import annotations

from collections.abc import Sequence

from partner_memory.errors import ConflictError, InvalidInputError, NotFoundError
from partner_memory.model import Message


def refuse_repeated_ids(ids: Sequence[str], batch: str) -> None:
    """InvalidInputError naming the first id that appears twice in `ids` (one `batch`)."""
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise InvalidInputError(f"message id {twice!r} appears twice in one {batch}")


def batch_ids(messages: Sequence[Message]) -> list[str]:
    """The ids of one batch of messages, refused (InvalidInputError) if one is there twice."""
    ids = [m.id for m in messages]
    refuse_repeated_ids(ids, "batch")
    return ids


def already_stored(message_id: str, namespace: str) -> ConflictError:
    """A rolling or an append that would store a message the namespace already holds."""
    return ConflictError(f"message id {message_id!r} is already stored in namespace {namespace!r}")


def lease_lost(namespace: str) -> ConflictError:
    """A commit under a rolling lease that is no longer the committer's."""
    return ConflictError(
        f"the rolling lease of namespace {namespace!r} was lost (it expired and another"
        " process took it); this rolling is abandoned"
    )


def unit_changed(unit_id: str, namespace: str, holds: int, expected: int) -> ConflictError:
    """A planned bulk write whose unit no longer holds what the plan saw."""
    return ConflictError(
        f"unit {unit_id!r} of namespace {namespace!r} holds {holds} messages, expected"
        f" {expected}; it changed while the write was planned"
    )


def none_found(message_ids: Sequence[str], namespace: str) -> NotFoundError:
    """A forget of messages none of which the namespace holds."""
    if len(message_ids) == 1:
        return NotFoundError(f"message {message_ids[0]!r} not found in namespace {namespace!r}")
    return NotFoundError(f"none of the {len(message_ids)} messages is in namespace {namespace!r}")
