"""The inspector's pages: thin calls into the service, rendered by the templates.

Namespaces travel in the query string (`/namespace?ns=agent-42/main`), so a
name holding "/" needs no escaping. Every list is paged: 10,000 namespaces or
a unit of 100,000 messages cost one page to show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import groupby
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from partner_memory.context import render_xml
from partner_memory.core import MemoryCore
from partner_memory.errors import (
    ConfigurationError,
    InvalidInputError,
    NotFoundError,
    PartnerMemoryError,
)
from partner_memory.inspector.chart import HEIGHT, WIDTH, daily_bars
from partner_memory.inspector.render import templates, words_of
from partner_memory.inspector.viewer import (
    LoginNeeded,
    Looking,
    PageError,
    Viewer,
    cookie_name,
    same_site,
)
from partner_memory.keys import SESSION_LIFETIME_MS
from partner_memory.memory import PartnerMemory
from partner_memory.model import MemorySlice, check_namespace
from partner_memory.store.contract.capabilities import NamespaceQuery

router = APIRouter(include_in_schema=False)

NAMESPACES_PAGE = 50
UNITS_PAGE = 20
SLICES_PAGE = 50
MESSAGES_PAGE = 200
ROLLINGS_PAGE = 50
CHART_ROLLINGS = 1000
SLICES_SHOWN_PER_UNIT = 5
#: The longest slice whose summary is traced to its messages on its page (a slice
#: imported whole may cover a large unit; the API traces any).
TRACED_MOST = 2000

Ns = Annotated[str, Query(max_length=400)]
Id = Annotated[str, Query(max_length=200)]
Page = Annotated[int, Query(ge=0, le=1_000_000)]


@contextmanager
def _shown() -> Iterator[None]:
    """Library errors become error pages with their message."""
    try:
        yield
    except NotFoundError as exc:
        raise PageError(404, str(exc)) from exc
    except InvalidInputError as exc:
        raise PageError(422, str(exc)) from exc
    except ConfigurationError as exc:
        raise PageError(403, str(exc)) from exc


def _page(
    request: Request, template: str, viewer: Viewer | None, status: int = 200, **values: Any
) -> Response:
    return templates.TemplateResponse(
        request, template, {"viewer": viewer, **values}, status_code=status
    )


def _memory(viewer: Viewer, ns: str) -> PartnerMemory:
    name = check_namespace(ns)
    viewer.require(name, "read")
    return viewer.access.memory(name)  # 404 as the API says it


# -- logging in ------------------------------------------------------------------------


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str = "/") -> Any:
    return _page(request, "login.html", None, next=_local(next))


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    key: Annotated[str, Form(max_length=200)],
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    same_site(request)
    keys = request.app.state.access.keys
    found = keys.authenticate(key.strip())
    if found is None:
        return _page(request, "login.html", None, 401, next=_local(next), failed=True)
    answer = RedirectResponse(_local(next), status_code=303)
    secure = request.url.scheme == "https"
    answer.set_cookie(
        cookie_name(request),
        keys.session(found),
        max_age=SESSION_LIFETIME_MS // 1000,
        httponly=True,
        samesite="strict",
        secure=secure,
    )
    return answer


@router.post("/logout")
def logout(request: Request) -> Response:
    same_site(request)
    answer = RedirectResponse("/login", status_code=303)
    answer.delete_cookie(cookie_name(request))
    return answer


def _local(target: str) -> str:
    """Only a path on this site: a login never sends the visitor elsewhere."""
    return target if target.startswith("/") and not target.startswith("//") else "/"


# -- reading ---------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
def namespaces(
    request: Request,
    viewer: Looking,
    q: Annotated[str, Query(max_length=400)] = "",
    after: Annotated[str | None, Query(max_length=400)] = None,
) -> Any:
    queries = viewer.access.service.queries
    matching = None if viewer.key is None else viewer.key.namespaces  # the key's, in the query
    shown = queries.overviews(NamespaceQuery(NAMESPACES_PAGE + 1, after, q, matching))
    page = shown[:NAMESPACES_PAGE]
    next_after = page[-1].name if len(shown) > NAMESPACES_PAGE else None
    total = None if q else queries.count_namespaces(matching=matching)
    return _page(
        request, "namespaces.html", viewer, page=page, q=q, after=after,
        next_after=next_after, total=total,
    )  # fmt: skip


@router.get("/namespace", response_class=HTMLResponse)
def namespace(
    request: Request,
    viewer: Looking,
    ns: Ns,
    after: Annotated[str | None, Query(max_length=200)] = None,
) -> Any:
    with _shown():
        memory = _memory(viewer, ns)
        core = memory.core
        blocks = memory.context()  # resolved once, shown as blocks and as XML
        units = core.list_units(limit=UNITS_PAGE, after=after)
        slices = {u.id: core.list_slices(u.id) for u in units.units}
        days = [(day, list(group)) for day, group in groupby(units.units, key=_day)]
        return _page(
            request, "namespace.html", viewer, ns=core.namespace, units=units, days=days,
            slices=slices, shown_per_unit=SLICES_SHOWN_PER_UNIT,
            window=memory.window(),
            blocks=blocks, xml=render_xml(blocks), totals=core.rolling_stats(),
            may_forget=viewer.may_forget(core.namespace),
        )  # fmt: skip


def _day(unit: Any) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(unit.timestamp / 1000, UTC).strftime("%Y-%m-%d")


@router.get("/unit", response_class=HTMLResponse)
def unit(request: Request, viewer: Looking, ns: Ns, unit: Id, page: Page = 0) -> Any:
    with _shown():
        core = _memory(viewer, ns).core
        info = core.get_unit_info(unit)
        every = core.list_slices(unit)
        shown = every[page * SLICES_PAGE : (page + 1) * SLICES_PAGE]
        return _page(
            request, "unit.html", viewer, ns=core.namespace, unit=info, slices=shown,
            page=page, pages=max(1, -(-len(every) // SLICES_PAGE)),
            may_forget=viewer.may_forget(core.namespace),
        )  # fmt: skip


def _traced(core: MemoryCore, unit: str, found: MemorySlice) -> list[dict[str, Any]]:
    """Each summary sentence with links to the messages it came from (their page and
    anchor on this slice's pages), and whether they support it."""
    read = core.read_slice(unit, found.id)
    ids = {found.start_index + i: m.id for i, m in enumerate(read.messages)}
    return [
        {
            "text": sentence.text,
            "supported": sentence.supported,
            "held": sentence.held,
            "sources": [
                (p, (p - found.start_index) // MESSAGES_PAGE, ids[p]) for p in sentence.positions
            ],
        }
        for sentence in read.provenance
    ]


@router.get("/slice", response_class=HTMLResponse)
def memory_slice(
    request: Request, *, viewer: Looking, ns: Ns, unit: Id, slice: Id, page: Page = 0
) -> Any:
    with _shown():
        core = _memory(viewer, ns).core
        every = core.list_slices(unit)
        at = next((i for i, s in enumerate(every) if s.id == slice), None)
        if at is None:
            raise NotFoundError(f"slice {slice!r} not found in unit {unit!r}")
        found = every[at]
        start = found.start_index + page * MESSAGES_PAGE
        end = min(found.end_index, start + MESSAGES_PAGE)
        messages = core.read_messages(unit, start, end) if start < end else []
        traced = _traced(core, unit, found) if len(found) <= TRACED_MOST else None
        return _page(
            request, "slice.html", viewer, ns=core.namespace, unit=core.get_unit_info(unit),
            slice=found, messages=list(zip(range(start, end), messages, strict=True)),
            traced=traced,
            page=page, pages=max(1, -(-len(found) // MESSAGES_PAGE)),
            previous=every[at - 1] if at > 0 else None,
            following=every[at + 1] if at + 1 < len(every) else None,
            may_forget=viewer.may_forget(core.namespace),
        )  # fmt: skip


@router.get("/rollings", response_class=HTMLResponse)
def rollings(
    request: Request,
    viewer: Looking,
    ns: Ns,
    before: Annotated[int | None, Query(ge=1)] = None,
) -> Any:
    with _shown():
        core = _memory(viewer, ns).core
        queries = viewer.access.service.queries
        history = queries.rolling_history(core.namespace, limit=ROLLINGS_PAGE, before=before)
        recent = queries.rolling_history(core.namespace, limit=CHART_ROLLINGS)
        return _page(
            request, "rollings.html", viewer, ns=core.namespace, history=history,
            bars=daily_bars(recent), width=WIDTH, height=HEIGHT, charted=len(recent),
            older=history[-1].seq if len(history) == ROLLINGS_PAGE else None,
            totals=core.rolling_stats(),
        )  # fmt: skip


@router.get("/recall", response_class=HTMLResponse)
def recall(
    request: Request,
    viewer: Looking,
    ns: Ns,
    q: Annotated[str, Query(max_length=2000)] = "",
    k: Annotated[int, Query(ge=1, le=100)] = 10,
) -> Any:
    with _shown():
        memory = _memory(viewer, ns)
        found = memory.recall(q, k=k, activate=False) if q.strip() else None
        return _page(
            request, "recall.html", viewer, ns=memory.namespace, q=q, k=k, found=found,
            words=words_of(q), holder=_holder(found),
        )  # fmt: skip


def _holder(found: Any) -> Callable[[Any], Any]:
    """The slice that holds a hit (by unit and position), to link the hit to it."""

    def holder(hit: Any) -> Any:
        if found is None or hit.unit_id is None or hit.position is None:
            return None
        return next(
            (
                s.slice
                for s in found.slices
                if s.unit_id == hit.unit_id
                and s.slice.start_index <= hit.position < s.slice.end_index
            ),
            None,
        )

    return holder


# -- forgetting ------------------------------------------------------------------------


@router.post("/forget", response_class=HTMLResponse)
def forget(
    request: Request,
    *,
    viewer: Looking,
    ns: Annotated[str, Form(max_length=400)],
    target: Annotated[str, Form(pattern="^(messages|slice|unit|namespace)$")],
    unit: Annotated[str, Form(max_length=200)] = "",
    slice: Annotated[str, Form(max_length=200)] = "",
    message_id: Annotated[list[str] | None, Form(max_length=10_000)] = None,
    confirmed: Annotated[str, Form(max_length=10)] = "",
) -> Any:
    same_site(request)
    with _shown():
        name = check_namespace(ns)
        viewer.require(name, "admin")
        memory = _memory(viewer, name)
        ids = list(message_id or [])
        if target == "messages" and not ids:
            raise PageError(422, "select at least one message to forget")
        if confirmed != "yes":
            return _page(
                request, "confirm.html", viewer, ns=name, target=target, unit=unit,
                slice=slice, ids=ids, back=_back(request),
            )  # fmt: skip
        return _forgotten(memory, target, unit, slice, ids)


def _forgotten(memory: PartnerMemory, target: str, unit: str, slice: str, ids: list[str]) -> Any:
    ns = memory.namespace
    if target == "namespace":
        memory.service.forget_namespace(ns)
        return RedirectResponse("/?forgotten=1", status_code=303)
    if target == "unit":
        memory.forget_unit(unit)
        return RedirectResponse(_at("/namespace", ns=ns), status_code=303)
    if target == "slice":
        memory.forget_slice(unit, slice)
        return RedirectResponse(_at("/unit", ns=ns, unit=unit), status_code=303)
    memory.forget_messages(ids)
    if unit and slice and _still(memory.core, unit, slice):
        return RedirectResponse(_at("/slice", ns=ns, unit=unit, slice=slice), status_code=303)
    return RedirectResponse(_at("/namespace", ns=ns), status_code=303)


def _back(request: Request) -> str:
    """Where Cancel goes: the page the form was on (a path of this site only)."""
    from urllib.parse import urlsplit

    came = urlsplit(request.headers.get("referer", "/"))
    return _local(came.path + (f"?{came.query}" if came.query else ""))


def _still(core: MemoryCore, unit: str, slice: str) -> bool:
    try:
        core.get_memory_slice(unit, slice)
    except PartnerMemoryError:
        return False
    return True


def _at(path: str, **query: str) -> str:
    from urllib.parse import urlencode

    return f"{path}?{urlencode(query)}"


def install(api: Any) -> None:
    """Add the pages, their static files and error pages to the service's app."""
    from fastapi.staticfiles import StaticFiles

    from partner_memory.inspector.render import HERE

    api.include_router(router)
    api.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    api.add_exception_handler(PageError, _error_page)
    api.add_exception_handler(LoginNeeded, _login_needed)


def _error_page(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PageError)
    return error_page(request, exc.status, exc.message)


def error_page(request: Request, status: int, message: str) -> Response:
    """An error as a page, for a browser (the API answers JSON)."""
    return _page(request, "error.html", None, status, code=status, message=message)


def _login_needed(request: Request, exc: Exception) -> Response:
    answer: Response
    if request.method == "GET":
        answer = RedirectResponse(_at("/login", next=str(request.url.path) + _query(request)), 303)
    else:
        answer = error_page(request, 401, "log in with a key")
    if request.cookies.get(cookie_name(request)):
        answer.delete_cookie(cookie_name(request))  # expired or revoked: ask again
    return answer


def _query(request: Request) -> str:
    return f"?{request.url.query}" if request.url.query else ""
