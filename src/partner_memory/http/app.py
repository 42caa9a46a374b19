"""The HTTP API: a thin adapter over one `MemoryService`, versioned under /v1.

Every rule lives below (the service, the handles, the store); the routes
turn requests into calls and answers into the documents of docs/json.md.
Errors the library raises become statuses: bad input 422 (naming the field),
unknown ids 404, conflicts 409, an unreachable database 503; keys are
checked in `access`. A namespace is one path segment: one holding "/" is
sent with it escaped (`agent-42%2Fmain`), and `_Guard` keeps that segment
escaped for routing. `_Guard` also answers 413 to a body over the limit,
and 421 to a `Host` the service does not serve (`hosts`: DNS rebinding).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException
from starlette.routing import Route

from partner_memory.access import Access, Refused
from partner_memory.errors import (
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PartnerMemoryError,
    StorageUnavailableError,
)
from partner_memory.http import DEFAULT_MAX_BODY, memory_routes, namespaces, recall_routes
from partner_memory.http.answers import error
from partner_memory.http.asgi import ASGIApp, Receive, Send
from partner_memory.http.hosts import HostPolicy
from partner_memory.http.mcp_endpoint import PATH as MCP_PATH
from partner_memory.http.mcp_endpoint import McpEndpoint
from partner_memory.http.metrics_route import MetricsRoute
from partner_memory.http.observed import Observed
from partner_memory.inspector import pages as inspector
from partner_memory.service import MemoryService
from partner_memory.telemetry.sdk import Exposition

log = logging.getLogger(__name__)

_STATUS: list[tuple[type[Exception], int, str]] = [
    (InvalidInputError, 422, "invalid_input"),
    (NotFoundError, 404, "not_found"),
    (ConflictError, 409, "conflict"),
    (StorageUnavailableError, 503, "unavailable"),
    (ConfigurationError, 503, "unavailable"),
]
_PREFIX = b"/v1/namespaces/"

#: FastAPI's own request spans and metrics, where it has them, stay off: `Observed` makes
#: the one server span of a request (refusals before routing included, with its request
#: id), and FastAPI's telemetry logs would carry exception messages.
_NATIVE_TELEMETRY_OFF: dict[str, Any] = (
    {
        "telemetry": {
            "tracing": False,
            "metrics": False,
            "logs": False,
            "operation_spans": False,
            "auto_configure": False,
        }
    }
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


class _TooLarge(Exception):
    pass


class _Guard:
    """ASGI middleware: a `Host` not served is refused, an escaped namespace segment stays
    escaped for routing, and a body over the limit is refused (by its declared length, or
    as it streams in)."""

    def __init__(self, app: ASGIApp, max_body: int, hosts: HostPolicy) -> None:
        self.app = app
        self.max_body = max_body
        self.hosts = hosts

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        raw_host = headers.get(b"host")
        host = None if raw_host is None else raw_host.decode("latin-1")
        if not self.hosts.permits(host):
            served = ", ".join(self.hosts.describe())
            message = (
                f"this service does not serve the host {host!r}"
                f" (it serves {served}; add a name with --allowed-host)"
            )
            await error(421, "misdirected", message)(scope, receive, send)
            return
        raw = scope.get("raw_path") or b""
        if raw.startswith(_PREFIX):
            segment, slash, rest = raw[len(_PREFIX) :].partition(b"/")
            tail = slash.decode() + unquote(rest.decode("latin-1"))
            # in place: what routing adds to the scope reaches the middleware outside
            scope["path"] = _PREFIX.decode() + segment.decode("latin-1") + tail
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_body:
            await self._too_large(scope, receive, send)
            return
        seen = 0

        async def counted() -> Any:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(
        self, scope: MutableMapping[str, Any], receive: Receive, send: Send
    ) -> None:
        await error(413, "too_large", f"request body over {self.max_body} bytes")(
            scope, receive, send
        )


def create_app(
    service: MemoryService,
    *,
    max_body: int = DEFAULT_MAX_BODY,
    hosts: HostPolicy | None = None,
    owns_service: bool = False,
    metrics: Exposition | None = None,
) -> ASGIApp:
    """The ASGI application serving `service` (closed with the server if it `owns_service`);
    it serves the loopback names unless `hosts` says otherwise, and `metrics` at /metrics
    (a key reading every namespace, once keys exist) when telemetry is set up."""

    hosts = hosts or HostPolicy()
    access = Access(service, service.keys)
    mcp = McpEndpoint(access, hosts)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(service.analysis.warm)  # before the first request
        async with mcp.running():
            yield
        if owns_service:
            service.close()  # waits for rollings in flight

    # /docs with Swagger UI's script served from here, not a CDN: it works air-gapped
    # (no /redoc: ReDoc still fetches its logo from its vendor)
    api = FastAPIOffline(
        redoc_url=None,
        title="partner-memory",
        version="1",
        description="Long-term memory for AI agents: record, roll, recall and forget.",
        lifespan=lifespan,
        **_NATIVE_TELEMETRY_OFF,
    )
    api.state.access = access
    api.router.routes.append(Route(MCP_PATH, mcp, methods=["GET", "POST", "DELETE"]))
    api.router.routes.append(Route("/metrics", MetricsRoute(access, metrics), methods=["GET"]))
    for router in (namespaces.router, memory_routes.router, recall_routes.router):
        api.include_router(router)
    inspector.install(api)  # the pages at /
    for kind, status, code in _STATUS:
        api.add_exception_handler(kind, _handler(status, code))
    api.add_exception_handler(Refused, _refused)
    api.add_exception_handler(RequestValidationError, _invalid)
    api.add_exception_handler(HTTPException, _http_error)
    api.add_exception_handler(PartnerMemoryError, _unexpected)
    return Observed(_Guard(api, max_body, hosts))


def _handler(status: int, code: str) -> Callable[[Request, Exception], JSONResponse]:
    def handle(request: Request, exc: Exception) -> JSONResponse:
        return error(status, code, str(exc))

    return handle


def _invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    fields = [
        {"field": ".".join(str(part) for part in problem["loc"]), "problem": problem["msg"]}
        for problem in exc.errors()
    ]
    named = "; ".join(f"{f['field']}: {f['problem']}" for f in fields)
    if not request.url.path.startswith("/v1/"):  # a page of the inspector: a page says it
        return inspector.error_page(request, 422, named or "invalid request")
    return error(422, "invalid_input", named or "invalid request", fields)


#: The error code of each status the framework itself answers (unknown route, method).
_HTTP_CODES = {
    404: "not_found",
    405: "method_not_allowed",
    400: "bad_request",
    406: "not_acceptable",
}


def _http_error(request: Request, exc: Exception) -> Response:
    """What routing refuses, in the service's own envelope (a page for the inspector's)."""
    assert isinstance(exc, HTTPException)
    message = f"{exc.detail}: {request.method} {request.url.path}"
    answer: Response
    if request.url.path.startswith("/v1/") or "text/html" not in request.headers.get("accept", ""):
        answer = error(exc.status_code, _HTTP_CODES.get(exc.status_code, "error"), message)
    else:
        answer = inspector.error_page(request, exc.status_code, message)
    for name, value in (exc.headers or {}).items():  # e.g. Allow for a 405
        answer.headers[name] = value
    return answer


def _refused(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Refused)
    return error(exc.status, "refused", exc.message)


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("request failed: %s", type(exc).__name__)  # never a body or a key
    return error(500, "internal", type(exc).__name__)
