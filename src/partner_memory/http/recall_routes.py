"""Routes to recall and to forget."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from partner_memory.core import MAX_PAGE_SIZE
from partner_memory.documents import recall_document, topics_document
from partner_memory.errors import NotFoundError
from partner_memory.http.access import Caller, Ns, Served
from partner_memory.http.documents import (
    ForgottenDoc,
    NamespaceForgottenDoc,
    RecallDoc,
    TopicsDoc,
    UnitForgottenDoc,
)
from partner_memory.http.models import ERRORS, ForgetMessagesIn, RecallIn
from partner_memory.recall.query import RecallQuery
from partner_memory.requests import ForgetRequest

router = APIRouter(responses=ERRORS)


@router.post("/v1/namespaces/{namespace}/recall", tags=["recall"], response_model=RecallDoc)
def recall(namespace: Ns, body: RecallIn, access: Served, key: Caller) -> dict[str, Any]:
    """The messages that best match the query, with the slices that hold them (by words,
    meaning, a date in the query, or a topic), kept to a role, speaker, unit or metadata;
    with `activate`, what was found enters the namespace's context (a write)."""
    name = access.allowed(key, namespace, "write" if body.activate else "read")
    found = access.memory(name).recall(RecallQuery.from_dict(body.model_dump()))
    return recall_document(name, found)


@router.post(
    "/v1/namespaces/{namespace}/forget/messages", tags=["forget"], response_model=ForgottenDoc
)
def forget_messages(
    namespace: Ns, body: ForgetMessagesIn, access: Served, key: Caller
) -> dict[str, Any]:
    """Forget messages everywhere; the slices that held them are summarised again."""
    name = access.allowed(key, namespace, "admin")
    count = access.memory(name).forget(ForgetRequest.messages(body.message_ids))
    return {"namespace": name, "message_count": count}


@router.delete(
    "/v1/namespaces/{namespace}/units/{unit_id}/slices/{slice_id}",
    tags=["forget"],
    response_model=ForgottenDoc,
)
def forget_slice(
    namespace: Ns, unit_id: str, slice_id: str, access: Served, key: Caller
) -> dict[str, Any]:
    """Forget a slice: its summary and every message it covers (either id may be an
    unambiguous prefix)."""
    name = access.allowed(key, namespace, "admin")
    memory = access.memory(name)
    count = memory.forget(ForgetRequest.slice(*memory.core.resolve_slice(unit_id, slice_id)))
    return {"namespace": name, "message_count": count}


@router.delete(
    "/v1/namespaces/{namespace}/units/{unit_id}", tags=["forget"], response_model=UnitForgottenDoc
)
def forget_unit(namespace: Ns, unit_id: str, access: Served, key: Caller) -> dict[str, Any]:
    """Forget a whole unit (one memory session); `unit_id` may be an unambiguous prefix."""
    name = access.allowed(key, namespace, "admin")
    memory = access.memory(name)
    unit_id = memory.core.resolve_unit_id(unit_id)
    memory.forget(ForgetRequest.unit(unit_id))
    return {"namespace": name, "unit_id": unit_id}


@router.delete("/v1/namespaces/{namespace}", tags=["forget"], response_model=NamespaceForgottenDoc)
def forget_namespace(namespace: Ns, access: Served, key: Caller) -> dict[str, Any]:
    """Forget a whole namespace."""
    name = access.allowed(key, namespace, "admin")
    if access.service.queries.namespace(name) is None:
        raise NotFoundError(f"namespace {name!r} not found")
    access.service.forget_namespace(name)
    return {"namespace": name}


@router.get("/v1/namespaces/{namespace}/topics", tags=["recall"], response_model=TopicsDoc)
def topics(
    namespace: Ns,
    access: Served,
    key: Caller,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 100,
) -> dict[str, Any]:
    """The topic paths the LLM filed the namespace's slices under, most used first."""
    name = access.allowed(key, namespace, "read")
    found = access.memory(name).topics(limit=limit)
    return topics_document(name, found)
