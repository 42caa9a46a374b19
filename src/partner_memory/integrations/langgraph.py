"""LangGraph: a `BaseStore` whose items live in partner-memory, each under its exact key.

    from partner_memory.integrations.langgraph import PartnerMemoryStore
    store = PartnerMemoryStore(db="memory.db")
    graph = builder.compile(store=store)
    store.put(("memories", "user-7"), "kyoto", {"text": "I'm off to Kyoto in April"})
    store.search(("memories", "user-7"), query="where am I travelling?")

Each item is a row of the store's items (`ItemStore`): get, put, delete and
the listings are exact, whatever recall does. A LangGraph namespace is a
partner-memory namespace (its labels escaped, each followed by "/":
`memories/user-7/`), and an item put with an index (the store's `fields`,
the whole value by default, or the put's own `index` paths) is also a
message there, whose text is those fields: `search(query=...)` is recall
over them, so a question finds items by words, meaning and dates, and the
inspector shows them. Putting a key again or deleting it forgets its old
message; forgetting the message (or the namespace) deletes the item.
Filters (`{"kind": "trip"}`, `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`)
compare fields as LangGraph's own stores do (a dotted path reaches into
nested objects); a search with a query ranks every indexed item the filter
keeps, recall's hits first (by score), then those recall did not reach
(newest first, score 0), up to `limit`. Items may expire (`ttl` in minutes,
a `TTLConfig`); an expired item is never returned, and `sweep_ttl` (or the
sweeper) deletes it and its message. What it does not do: serve a
`MemoryClient` (items are not in the HTTP API), or compare vectors of an
`IndexConfig`'s own embedder (recall has its own).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import get_text_at_path

from partner_memory.clock import system_clock
from partner_memory.errors import InvalidInputError, NotFoundError, PartnerMemoryError
from partner_memory.integrations.binding import opened
from partner_memory.items import StoredItem
from partner_memory.model import Message
from partner_memory.service import MemoryService

log = logging.getLogger(__name__)

#: Where an item's message names the item's key.
KEY_KEY = "langgraph_key"
_MINUTE_MS = 60_000
#: Candidates recall is asked for per result when a filter may drop some.
_FILTERED_CANDIDATES = 4
_MAX_CANDIDATES = 1000
#: Items a filtered listing reads at a time.
_FILTER_PAGE = 200
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def namespace_of(labels: Sequence[str]) -> str:
    """The partner-memory namespace of a LangGraph namespace: each label escaped and
    followed by "/", so a namespace's name starts with those of its ancestors only."""
    return "".join(f"{quote(label, safe='')}/" for label in labels)


def labels_of(namespace: str) -> tuple[str, ...]:
    """The LangGraph namespace a partner-memory namespace was made from."""
    return tuple(unquote(label) for label in namespace.split("/")[:-1])


class PartnerMemoryStore(BaseStore):
    """LangGraph's long-term store over partner-memory: exact items, recall as search."""

    supports_ttl = True

    def __init__(
        self,
        *,
        db: str | Path | None = None,
        memory: MemoryService | None = None,
        fields: Sequence[str] = ("$",),
        ttl: TTLConfig | None = None,
    ) -> None:
        """`fields`: the paths of a value that recall searches (`"$"`: all of it);
        `ttl`: LangGraph's TTL settings (`default_ttl` minutes, `refresh_on_read`,
        `sweep_interval_minutes` for `start_ttl_sweeper`)."""
        if memory is not None and not isinstance(memory, MemoryService):
            raise InvalidInputError(
                "PartnerMemoryStore keeps items in the database: pass a MemoryService"
                f" (or db=), not a {type(memory).__name__}"
            )
        if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
            raise InvalidInputError(f"fields must be a list of field paths, got {fields!r}")
        service, self._owned = opened(db, memory)
        assert isinstance(service, MemoryService)  # a client was refused above
        self._service = service
        self._items = service.items
        self.fields = list(fields)
        self.ttl_config = ttl
        self._sweeper: tuple[threading.Event, concurrent.futures.Future[None]] | None = None

    # -- BaseStore ---------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Each operation in turn (a put before a get of the same key is seen by it)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            else:
                raise InvalidInputError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- time to live ------------------------------------------------------------------

    def sweep_ttl(self) -> int:
        """Delete the items whose time ran out, and their messages; how many."""
        swept = 0
        while gone := self._items.expire(now=system_clock()):
            self._forget(gone)
            swept += len(gone)
        return swept

    def start_ttl_sweeper(
        self, sweep_interval_minutes: int | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep every `sweep_interval_minutes` (else the TTL config's, else 5) in a
        thread, until `stop_ttl_sweeper` or `close`."""
        if self._sweeper is not None:
            return self._sweeper[1]
        config = self.ttl_config or {}
        minutes = sweep_interval_minutes or config.get("sweep_interval_minutes") or 5
        stop, done = threading.Event(), concurrent.futures.Future[None]()

        def sweep() -> None:
            try:
                while not stop.wait(minutes * 60):
                    try:
                        self.sweep_ttl()
                    except PartnerMemoryError as exc:  # an outage: the next sweep tries again
                        log.warning("the LangGraph store's TTL sweep failed: %s", exc)
            finally:
                done.set_result(None)

        threading.Thread(target=sweep, name="partner-memory-ttl", daemon=True).start()
        self._sweeper = (stop, done)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within `timeout` seconds."""
        if self._sweeper is None:
            return True
        stop, done = self._sweeper
        stop.set()
        try:
            done.result(timeout)
        except concurrent.futures.TimeoutError:
            return False
        self._sweeper = None
        return True

    def close(self) -> None:
        """Stop the sweeper; close the service opened from `db` (one handed in stays open)."""
        self.stop_ttl_sweeper()
        if self._owned:
            self._service.close()

    # -- operations --------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        found = self._items.get(
            namespace_of(op.namespace), [op.key], now=system_clock(), refresh=op.refresh_ttl
        )
        return _item(found[0]) if found else None

    def _put(self, op: PutOp) -> None:
        namespace = namespace_of(op.namespace)
        if op.value is None:
            deleted = self._items.delete(namespace, op.key)
            if deleted is not None:
                self._forget([deleted])
            return
        if not isinstance(op.value, Mapping):
            raise InvalidInputError(f"a store value must be a dict, got {type(op.value).__name__}")
        try:
            value = json.dumps(dict(op.value), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"a store value must be JSON: {exc}") from exc
        now = system_clock()
        ttl = None if op.ttl is None else _ttl_ms(op.ttl)
        message_id = None if op.index is False else self._indexed(namespace, op, op.value, now)
        replaced = self._items.put(
            StoredItem(
                namespace,
                op.key,
                value,
                now,
                now,
                expires_at=None if ttl is None else now + ttl,
                ttl=ttl,
                message_id=message_id,
            )
        )
        if replaced is not None:
            self._forget([replaced])

    def _indexed(self, namespace: str, op: PutOp, value: Mapping[str, Any], now: int) -> str | None:
        """Record the message recall finds the item by (None: its fields hold no text)."""
        paths = self.fields if not op.index else op.index
        texts = [t for path in paths for t in get_text_at_path(value, path) if t.strip()]
        if not texts:
            return None
        message = Message("user", "\n".join(texts), timestamp=now, metadata={KEY_KEY: op.key})
        self._service.memory(namespace).record_messages([message])
        return message.id

    def _forget(self, items: Sequence[StoredItem]) -> None:
        """Forget the messages of items gone or replaced: one forget per namespace."""
        held = [(i.namespace, i.message_id) for i in items if i.message_id is not None]
        for namespace, ids in _by_namespace(held).items():
            with contextlib.suppress(NotFoundError):  # forgotten already (namespace, by hand)
                self._service.memory(namespace).forget_messages(ids)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = namespace_of(op.namespace_prefix)
        _check_filter(op.filter)
        now = system_clock()
        found: list[tuple[StoredItem, float | None]]
        if op.query and op.query.strip():
            found = self._recalled(prefix, op, now)
        elif op.filter:
            found = [(i, None) for i in self._filtered(prefix, op, now)]
        else:
            listed = self._items.listing(prefix, now=now, limit=op.limit, offset=op.offset)
            found = [(i, None) for i in listed]
        if op.refresh_ttl:
            self._refresh([item for item, _ in found if item.ttl is not None])
        return [SearchItem(**_fields(stored), score=score) for stored, score in found]

    def _filtered(self, prefix: str, op: SearchOp, now: int) -> list[StoredItem]:
        """The items under `prefix` the filter keeps, newest first, from `offset`."""
        return self._kept(prefix, op, now, op.offset + op.limit)[op.offset :]

    def _kept(
        self,
        prefix: str,
        op: SearchOp,
        now: int,
        wanted: int,
        *,
        indexed: bool = False,
        skip: frozenset[tuple[str, str]] = frozenset(),
    ) -> list[StoredItem]:
        """The first `wanted` items under `prefix` the filter keeps (with `indexed`, only
        items with a message; never those in `skip`), newest first, a page at a time."""
        kept: list[StoredItem] = []
        offset = 0
        while len(kept) < wanted:
            page = self._items.listing(prefix, now=now, limit=_FILTER_PAGE, offset=offset)
            kept += [
                i
                for i in page
                if _matches(i, op.filter)
                and (i.namespace, i.key) not in skip
                and not (indexed and i.message_id is None)
            ]
            if len(page) < _FILTER_PAGE:
                break
            offset += _FILTER_PAGE
        return kept[:wanted]

    def _recalled(
        self, prefix: str, op: SearchOp, now: int
    ) -> list[tuple[StoredItem, float | None]]:
        """Recall's hits in each namespace under `prefix`, as their items, best first (a
        hit of a message its item no longer names - replaced meanwhile - is none)."""
        wanted = op.offset + op.limit
        k = min(_MAX_CANDIDATES, wanted * _FILTERED_CANDIDATES) if op.filter else wanted
        scored: list[tuple[float, StoredItem]] = []
        for namespace in self._items.namespaces(now=now, prefix=prefix):
            try:
                hits = self._service.memory(namespace).recall(op.query or "", k=k, activate=False)
            except NotFoundError:  # only unindexed items: no messages
                continue
            scores = {h.message.id: h.score for h in hits.hits}
            keys = {h.message.metadata.get(KEY_KEY) for h in hits.hits}
            held = [k for k in keys if isinstance(k, str)]
            for item in self._items.get(namespace, held, now=now):
                score = scores.get(item.message_id or "")
                if score is not None and _matches(item, op.filter):
                    scored.append((score, item))
        scored.sort(key=lambda s: -s[0])
        ranked: list[tuple[StoredItem, float | None]] = [(i, score) for score, i in scored]
        if len(ranked) < wanted:
            # as LangGraph's stores rank every indexed item under the prefix: those the
            # filter keeps that recall did not reach follow its hits, newest first, with
            # a score of 0 (nothing of the query found in them)
            reached = frozenset((i.namespace, i.key) for i, _ in ranked)
            rest = self._kept(prefix, op, now, wanted - len(ranked), indexed=True, skip=reached)
            ranked += [(item, 0.0) for item in rest]
        return ranked[op.offset : wanted]

    def _refresh(self, items: Sequence[StoredItem]) -> None:
        for namespace, keys in _by_namespace((i.namespace, i.key) for i in items).items():
            self._items.get(namespace, keys, now=system_clock(), refresh=True)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix = _plain_prefix(op.match_conditions or ())
        found = [labels_of(n) for n in self._items.namespaces(now=system_clock(), prefix=prefix)]
        if op.match_conditions:
            found = [ns for ns in found if all(_meets(c, ns) for c in op.match_conditions)]
        depth = op.max_depth
        listed = sorted(found if depth is None else {ns[:depth] for ns in found})
        return listed[op.offset : op.offset + op.limit]


def _by_namespace(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """(namespace, name) pairs as each namespace's names, in order."""
    grouped: dict[str, list[str]] = {}
    for namespace, name in pairs:
        grouped.setdefault(namespace, []).append(name)
    return grouped


def _ttl_ms(minutes: float) -> int:
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or not minutes > 0:
        raise InvalidInputError(f"ttl must be a positive number of minutes, got {minutes!r}")
    return max(1, round(minutes * _MINUTE_MS))


def _item(stored: StoredItem) -> Item:
    return Item(**_fields(stored))


def _fields(stored: StoredItem) -> dict[str, Any]:
    """What LangGraph's `Item` and `SearchItem` are made of."""
    return {
        "value": json.loads(stored.value),
        "key": stored.key,
        "namespace": labels_of(stored.namespace),
        "created_at": datetime.fromtimestamp(stored.created_at / 1000, UTC),
        "updated_at": datetime.fromtimestamp(stored.updated_at / 1000, UTC),
    }


def _plain_prefix(conditions: Sequence[MatchCondition]) -> str:
    """The namespace prefix a listing's first prefix condition fixes (up to a wildcard)."""
    for condition in conditions:
        if condition.match_type == "prefix":
            fixed = []
            for label in condition.path:
                if label == "*":
                    break
                fixed.append(label)
            return namespace_of(fixed)
    return ""


def _meets(condition: MatchCondition, labels: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if condition.match_type not in ("prefix", "suffix"):
        raise InvalidInputError(f"unknown namespace match type {condition.match_type!r}")
    if len(labels) < len(path):
        return False
    held = labels[: len(path)] if condition.match_type == "prefix" else labels[-len(path) :]
    return all(p in ("*", h) for p, h in zip(path, held, strict=True)) if path else True


def _check_filter(filter: Mapping[str, Any] | None) -> None:
    for field, wanted in (filter or {}).items():
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            unknown = sorted(str(k) for k in wanted if k not in _OPERATORS)
            if unknown:
                raise InvalidInputError(
                    f"filter on {field!r}: unknown operator {unknown[0]!r}"
                    f" (known: {', '.join(sorted(_OPERATORS))})"
                )


def _matches(item: StoredItem, filter: Mapping[str, Any] | None) -> bool:
    if not filter:
        return True
    value = json.loads(item.value)
    return all(_compare(_field(value, field), wanted) for field, wanted in filter.items())


def _field(value: Mapping[str, Any], field: str) -> Any:
    """A filter's field: a top-level key, else a dotted path into nested objects
    ("user.access-level"), as LangGraph's SQLite and PostgreSQL stores read it."""
    if field in value or "." not in field:
        return value.get(field)
    held: Any = value
    for part in field.split("."):
        if not isinstance(held, Mapping):
            return None
        held = held.get(part)
    return held


def _compare(held: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: nested dicts compare field by field, lists item by
    item, `$` operators apply to the value (a number compared with what is not one
    never matches)."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(held, op, operand) for op, operand in wanted.items())
        return isinstance(held, Mapping) and all(
            _compare(held.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(held, list | tuple)
            and len(held) == len(wanted)
            and all(_compare(h, w) for h, w in zip(held, wanted, strict=True))
        )
    return bool(held == wanted)


def _apply(held: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(held == operand)
    if op == "$ne":
        return bool(held != operand)
    try:
        left, right = float(held), float(operand)
    except (TypeError, ValueError):
        return False
    return {
        "$gt": left > right,
        "$gte": left >= right,
        "$lt": left < right,
        "$lte": left <= right,
    }[op]
