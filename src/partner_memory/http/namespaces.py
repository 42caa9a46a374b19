"""Routes over namespaces: list, create, stats, the rolling log; and the service's health."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from partner_memory.core import MAX_PAGE_SIZE
from partner_memory.documents import namespaces_document, stats_document
from partner_memory.errors import ConflictError, NotFoundError
from partner_memory.http.access import Caller, Ns, Served
from partner_memory.http.documents import (
    NamespaceOut,
    NamespacesDoc,
    RollingsDoc,
    StatsDoc,
    StatusDoc,
)
from partner_memory.http.models import ERRORS, MAX_MS, NamespaceIn

router = APIRouter(responses=ERRORS)


@router.get("/healthz", tags=["service"], response_model=StatusDoc)
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", tags=["service"], response_model=StatusDoc)
def readyz(access: Served) -> dict[str, str]:
    """The database answers (503 when it does not)."""
    access.service.queries.count_namespaces()
    return {"status": "ready"}


@router.get("/v1/namespaces", tags=["namespaces"], response_model=NamespacesDoc)
def list_namespaces(
    access: Served,
    key: Caller,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 100,
    after: Annotated[str | None, Query(max_length=400)] = None,
) -> dict[str, Any]:
    """Namespaces by name (those the key may read), paged by `after`."""
    queries = access.service.queries
    matching = None if key is None else key.namespaces  # every key may read what it opens
    found = queries.namespaces(limit=limit + 1, after=after, matching=matching)
    page, more = found[:limit], len(found) > limit
    total = queries.count_namespaces(matching=matching)
    return namespaces_document(page, total=total, limit=limit, more=more)


@router.post("/v1/namespaces", status_code=201, tags=["namespaces"], response_model=NamespaceOut)
def create_namespace(body: NamespaceIn, access: Served, key: Caller) -> dict[str, Any]:
    """Create a namespace (409 if it exists)."""
    name = access.allowed(key, body.namespace, "write")
    if access.service.queries.namespace(name) is not None:
        raise ConflictError(f"namespace {name!r} exists")
    access.memory(name, create=True)
    info = access.service.queries.namespace(name)
    if info is None:  # forgotten meanwhile by another request
        raise NotFoundError(f"namespace {name!r} not found")
    return info.to_dict()


@router.get("/v1/namespaces/{namespace}/stats", tags=["namespaces"], response_model=StatsDoc)
def stats(namespace: Ns, access: Served, key: Caller) -> dict[str, Any]:
    """Units and the totals over every rolling (the figures of `partner-memory stats`)."""
    name = access.allowed(key, namespace, "read")
    info = access.service.queries.namespace(name)
    if info is None:
        raise NotFoundError(f"namespace {name!r} not found")
    return stats_document(access.memory(name).core, info)


@router.get("/v1/namespaces/{namespace}/rollings", tags=["namespaces"], response_model=RollingsDoc)
def rollings(
    namespace: Ns,
    access: Served,
    key: Caller,
    after: Annotated[int, Query(ge=0, le=MAX_MS)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 20,
) -> dict[str, Any]:
    """The rolling log after sequence number `after`, oldest first."""
    name = access.allowed(key, namespace, "read")
    access.memory(name)  # 404 for an unknown namespace
    entries = access.service.queries.log(name, after, limit=limit)
    return {
        "namespace": name,
        "rollings": [
            {
                "seq": e.seq,
                "unit_id": e.unit.id,
                "slice": e.slice.to_dict(),
                "message_count": len(e.messages),
                "idle": e.idle,
            }
            for e in entries
        ],
    }
