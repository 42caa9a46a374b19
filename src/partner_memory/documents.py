"""The JSON documents every interface sends (docs/json.md), made in one place.

The CLI's `--json` and the HTTP service answer with the same documents for
the same question, so a field means one thing wherever it appears.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from partner_memory.context.workspace import ResolvedBlock
from partner_memory.core import MemoryCore
from partner_memory.model import NamespaceInfo, WindowMessage, plain
from partner_memory.recall.results import RecallResult, TopicCount
from partner_memory.rolling.after_rolling import RollingResult


def unit_document(core: MemoryCore, unit_id: str, *, messages: bool) -> dict[str, Any]:
    """A unit with its slices (and its messages)."""
    info = core.get_unit_info(unit_id)
    document = {
        "namespace": core.namespace,
        "unit": info.to_dict(),
        "slices": plain(core.list_slices(unit_id)),
    }
    if messages:
        document["messages"] = plain(core.read_messages(unit_id))
    return document


def slice_document(core: MemoryCore, unit_id: str, slice_id: str) -> dict[str, Any]:
    """A slice's summary beside the original messages it covers, and where each sentence
    of the summary came from."""
    return core.read_slice(unit_id, slice_id).to_dict()


def stats_document(core: MemoryCore, info: NamespaceInfo) -> dict[str, Any]:
    return {
        "namespace": core.namespace,
        "unit_count": info.unit_count,
        "rolling_totals": core.rolling_stats().to_dict(),
    }


def namespaces_document(
    page: Sequence[NamespaceInfo], *, total: int, limit: int, more: bool
) -> dict[str, Any]:
    return {
        "namespaces": plain(page),
        "total": total,
        "limit": limit,
        "next_after": page[-1].name if more and page else None,
    }


def recall_document(namespace: str, found: RecallResult) -> dict[str, Any]:
    return {"namespace": namespace} | found.to_dict()


def context_document(namespace: str, blocks: Sequence[ResolvedBlock]) -> dict[str, Any]:
    return {"namespace": namespace, "blocks": plain(blocks)}


def topics_document(namespace: str, found: Sequence[TopicCount]) -> dict[str, Any]:
    return {"namespace": namespace, "topics": plain(found)}


def window_document(namespace: str, window: Sequence[WindowMessage]) -> dict[str, Any]:
    """The window, oldest first: each message with its interaction's time."""
    return {"namespace": namespace, "messages": plain(window)}


def rolling_document(namespace: str, result: RollingResult | None, *, idle: bool) -> dict[str, Any]:
    """What a rolling made (`roll`, POST .../roll); `rolled` false, and nothing made,
    when the window held too little to roll."""
    if result is None:
        return {
            "namespace": namespace,
            "rolled": False,
            "unit_id": None,
            "slice": None,
            "unit": None,
            "increment_messages": [],
            "summary": None,
            "rolling_size": None,
            "retain_divisor": None,
            "idle": idle,
        }
    return {
        "namespace": namespace,
        "rolled": True,
        "unit_id": result.memory_unit.id,
        "slice": result.memory_slice.to_dict(),
        "unit": result.memory_unit.to_dict(),
        "increment_messages": plain(list(result.increment_messages)),
        "summary": result.summary,
        "rolling_size": result.rolling_size,
        "retain_divisor": result.retain_divisor,
        "idle": result.idle,
    }
