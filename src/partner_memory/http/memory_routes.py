"""Routes that write a namespace's memory and read it back."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.responses import PlainTextResponse

from partner_memory.context import Domain, render_xml
from partner_memory.core import MAX_PAGE_SIZE
from partner_memory.documents import (
    context_document,
    rolling_document,
    slice_document,
    unit_document,
    window_document,
)
from partner_memory.http.access import Caller, Ns, Served
from partner_memory.http.documents import (
    ContextDoc,
    MessagesDoc,
    RollDoc,
    SessionDoc,
    SliceDoc,
    TurnDoc,
    UnitDoc,
    UnitsDoc,
    WindowDoc,
)
from partner_memory.http.models import ERRORS, MAX_MS, ErrorBody, MessagesIn, TurnIn
from partner_memory.memory import DEFAULT_DOMAINS
from partner_memory.model import Message, plain
from partner_memory.requests import TurnInput

router = APIRouter(responses=ERRORS)


@router.post(
    "/v1/namespaces/{namespace}/turns", status_code=201, tags=["write"], response_model=TurnDoc
)
def record_turn(namespace: Ns, body: TurnIn, access: Served, key: Caller) -> dict[str, Any]:
    """Record one exchange (creating the namespace); a rolling may start in the background."""
    name = access.allowed(key, namespace, "write")
    turn = access.memory(name, create=True).record(TurnInput.from_dict(body.model_dump()))
    return {
        "namespace": name,
        "messages": plain([turn.user, turn.assistant]),
        "replied": turn.replied,
    }


@router.post(
    "/v1/namespaces/{namespace}/messages",
    status_code=201,
    tags=["write"],
    response_model=MessagesDoc,
)
def record_messages(namespace: Ns, body: MessagesIn, access: Served, key: Caller) -> dict[str, Any]:
    """Record messages as they are: roles, ids, times, metadata."""
    name = access.allowed(key, namespace, "write")
    given = [
        Message(m.role, m.content, timestamp=m.timestamp, metadata=m.metadata)
        if m.id is None
        else Message(m.role, m.content, id=m.id, timestamp=m.timestamp, metadata=m.metadata)
        for m in body.messages
    ]
    length = access.memory(name, create=True).record_messages(given, interaction=body.interaction)
    return {"namespace": name, "messages": plain(given), "window_length": length}


@router.post("/v1/namespaces/{namespace}/roll", tags=["write"], response_model=RollDoc)
def roll(
    namespace: Ns,
    access: Served,
    key: Caller,
    idle: bool = False,
    through: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> dict[str, Any]:
    """Roll the window now; `rolled` is false when there was too little to roll. `idle`
    rolls all of it and starts a new session; `through` rolls up to that message id."""
    name = access.allowed(key, namespace, "write")
    result = access.memory(name).roll_now(idle=idle, through=through)
    return rolling_document(name, result, idle=idle)


@router.post("/v1/namespaces/{namespace}/session/end", tags=["write"], response_model=SessionDoc)
def end_session(namespace: Ns, access: Served, key: Caller) -> dict[str, Any]:
    """Start a new memory session: the next rolling opens a new unit."""
    name = access.allowed(key, namespace, "write")
    session = access.memory(name).core.refresh_memory_session()
    return {"namespace": name, "memory_session_id": session}


@router.get("/v1/namespaces/{namespace}/window", tags=["read"], response_model=WindowDoc)
def window(namespace: Ns, access: Served, key: Caller) -> dict[str, Any]:
    """The messages not rolled yet, oldest first, each with its interaction's time."""
    name = access.allowed(key, namespace, "read")
    return window_document(name, access.memory(name).window())


@router.get(
    "/v1/namespaces/{namespace}/context",
    tags=["read"],
    response_model=None,
    responses={
        200: {
            "description": "The blocks (json) or the context as XML.",
            "model": ContextDoc,
            "content": {"application/xml": {"schema": {"type": "string"}}},
        },
        406: {"model": ErrorBody, "description": "`Accept` names neither JSON nor XML"},
    },
)
def context(
    namespace: Ns,
    access: Served,
    key: Caller,
    *,
    format: Annotated[str | None, Query(pattern="^(json|xml)$")] = None,
    domain: Annotated[list[Domain] | None, Query()] = None,
    accept: Annotated[str | None, Header()] = None,
) -> dict[str, Any] | PlainTextResponse:
    """The context as the agent receives it: its blocks (json), or the XML, as `format`
    says, else as `Accept` prefers (`application/xml`; JSON by default); `domain`
    (repeatable, most wanted first) chooses the domains, by default the agent's."""
    chosen = format or negotiated(accept)
    name = access.allowed(key, namespace, "read")
    blocks = access.memory(name).context(domain or DEFAULT_DOMAINS)
    if chosen == "xml":
        return PlainTextResponse(render_xml(blocks), media_type="application/xml")
    return context_document(name, blocks)


#: The media types the context is served as, and the format each one is.
_CONTEXT_TYPES = {"application/json": "json", "application/xml": "xml", "text/xml": "xml"}


def negotiated(accept: str | None) -> str:
    """The format `Accept` prefers (the highest q; JSON on a tie or a wildcard), or 406."""
    if accept is None or not accept.strip():
        return "json"
    best: tuple[float, int, str] | None = None
    for rank, offer in enumerate(accept.split(",")):
        media, *params = (part.strip() for part in offer.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        media = media.lower()
        if quality <= 0:
            continue
        if media in ("*/*", "application/*"):
            found = "json"
        elif media in _CONTEXT_TYPES:
            found = _CONTEXT_TYPES[media]
        elif media == "text/*":
            found = "xml"
        else:
            continue
        candidate = (quality, -rank, found)
        if best is None or candidate[:2] > best[:2]:
            best = candidate
    if best is None:
        raise HTTPException(
            406,
            f"Accept {accept!r}: the context is served as application/json or"
            " application/xml (or ?format=json|xml)",
        )
    return best[2]


@router.get("/v1/namespaces/{namespace}/units", tags=["read"], response_model=UnitsDoc)
def units(
    namespace: Ns,
    access: Served,
    key: Caller,
    *,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = 20,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
    after: Annotated[str | None, Query(max_length=400)] = None,
    since: Annotated[int | None, Query(ge=0, le=MAX_MS)] = None,
    until: Annotated[int | None, Query(ge=0, le=MAX_MS)] = None,
) -> dict[str, Any]:
    """Units newest first, paged; `since`/`until` bound their times."""
    name = access.allowed(key, namespace, "read")
    core = access.memory(name).core
    page = core.list_units(limit=limit, offset=offset, since=since, until=until, after=after)
    return {"namespace": name} | page.to_dict()


@router.get(
    "/v1/namespaces/{namespace}/units/{unit_id}",
    tags=["read"],
    response_model=UnitDoc,
    response_model_exclude_unset=True,
)
def unit(
    namespace: Ns, unit_id: str, access: Served, key: Caller, messages: bool = False
) -> dict[str, Any]:
    """A unit and its slices (and with `messages`, its messages); `unit_id` may be an
    unambiguous prefix of the id, as on the command line."""
    name = access.allowed(key, namespace, "read")
    core = access.memory(name).core
    return unit_document(core, core.resolve_unit_id(unit_id), messages=messages)


@router.get(
    "/v1/namespaces/{namespace}/units/{unit_id}/slices/{slice_id}",
    tags=["read"],
    response_model=SliceDoc,
)
def memory_slice(
    namespace: Ns, unit_id: str, slice_id: str, access: Served, key: Caller
) -> dict[str, Any]:
    """A slice's summary beside the original messages it covers (either id may be an
    unambiguous prefix)."""
    name = access.allowed(key, namespace, "read")
    core = access.memory(name).core
    return slice_document(core, *core.resolve_slice(unit_id, slice_id))
