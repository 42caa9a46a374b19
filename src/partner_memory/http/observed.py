"""Every request seen by the operator's tools: a server span, a duration, a log line.

The outermost ASGI layer, so refusals before routing (421, 413) are seen too.
A request carries an id - the client's `X-Request-ID` when it is a plain
token, else a new one - that comes back in the response's header, names
the log line and sits on the span, so one request can be followed across
the client's logs, ours and the traces. The span continues the client's
trace (W3C `traceparent`). The log line (`partner_memory.access`, INFO)
has the method, the route template, the status, the duration, the
namespace, the key's id and the request id: never a body, a query string,
a header's value or a key.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import unquote

from opentelemetry import propagate
from opentelemetry.trace import SpanKind, Status, StatusCode

from partner_memory.http.asgi import ASGIApp, Receive, Send
from partner_memory.telemetry import names as n
from partner_memory.telemetry.instruments import escaped, instruments

#: The response header (and request header) carrying a request's id.
REQUEST_ID_HEADER = "x-request-id"
_CLIENT_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

access_log = logging.getLogger("partner_memory.access")
_PLAIN_ROUTES = ("/mcp", "/metrics", "/static")


def _route(scope: MutableMapping[str, Any]) -> str | None:
    """The route template that answered ("/v1/namespaces/{namespace}/recall"), if any."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    raw = scope.get("path", "")
    for plain in _PLAIN_ROUTES:  # Starlette's own routes, which do not name themselves
        if raw == plain or raw.startswith(plain + "/"):
            return plain
    return None


class Observed:
    """ASGI middleware: request id, server span, `http.server.request.duration`, log line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}
        given = headers.get(REQUEST_ID_HEADER, "")
        request_id = given if _CLIENT_ID.fullmatch(given) else uuid.uuid4().hex
        state = scope.setdefault("state", {})  # shared with the routes' request.state
        state["request_id"] = request_id
        method = scope.get("method", "")
        status = 500
        started = time.perf_counter()

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message = dict(message)
                message["headers"] = [
                    *message.get("headers", []),
                    (REQUEST_ID_HEADER.encode(), request_id.encode()),
                ]
            await send(message)

        parts = instruments()
        with parts.tracer.start_as_current_span(
            method,
            context=propagate.extract(headers),
            kind=SpanKind.SERVER,
            attributes={n.HTTP_METHOD: method, n.URL_PATH: scope.get("path", "")},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                await self.app(scope, receive, sending)
            except BaseException as exc:
                escaped(span, exc)
                raise
            finally:
                seconds = time.perf_counter() - started
                route = _route(scope)
                labels: dict[str, Any] = {n.HTTP_METHOD: method, n.HTTP_STATUS: status}
                if route is not None:
                    labels[n.HTTP_ROUTE] = route
                    span.update_name(f"{method} {route}")
                span.set_attributes({**labels, n.REQUEST_ID: request_id})
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))
                parts.http_duration.record(seconds, labels)
                params = scope.get("path_params") or {}
                namespace = params.get("namespace")
                access_log.info(
                    "%s %s %d",
                    method,
                    route or "-",
                    status,
                    extra={
                        "event": "request",
                        "method": method,
                        "route": route,
                        "status": status,
                        "duration_ms": round(seconds * 1000, 3),
                        "namespace": None if namespace is None else unquote(str(namespace)),
                        "key_id": state.get("key_id"),
                        "request_id": request_id,
                    },
                )
