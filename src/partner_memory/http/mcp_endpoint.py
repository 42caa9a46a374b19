"""The MCP tools over streamable HTTP at /mcp, behind the same keys as /v1.

A request names its namespace (`/mcp?namespace=NS`, or the header
`X-Partner-Memory-Namespace`) and carries its key as `Authorization: Bearer
KEY`. Both are checked here before the SDK sees the request: 401 without a
valid key (when keys exist), 403 when the key may not read the namespace,
422 without a namespace. Each tool then checks the scope it needs (write to
remember, admin to forget) and answers a refusal as a tool error.

The SDK runs stateless with JSON answers: with several workers, the next
request of a client may reach another process, so no session may live in one.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.requests import Request

from partner_memory.access import Access, Refused
from partner_memory.errors import InvalidInputError
from partner_memory.http.answers import error
from partner_memory.http.hosts import HostPolicy
from partner_memory.keys import ApiKey
from partner_memory.mcp_tools import build_server
from partner_memory.memory import PartnerMemory

# the SDK's session manager says at INFO when it starts and stops: not worth a line
logging.getLogger("mcp.server.streamable_http_manager").setLevel(logging.WARNING)

PATH = "/mcp"
NAMESPACE_HEADER = "x-partner-memory-namespace"
#: Where the checked caller travels from the endpoint to the tools, in the ASGI scope.
_CALLER = "partner_memory.caller"

Receive = Any
Send = Any


class McpEndpoint:
    """ASGI app for /mcp: checks key and namespace, then hands the request to the SDK."""

    def __init__(self, access: Access, hosts: HostPolicy) -> None:
        self.access = access
        self.server: MCPServer = build_server(self._target)
        # Builds the SDK's session manager; the app it returns is not used (no
        # Starlette routing, our own checks and body limit come first). The SDK's
        # rebinding check (Host, and Origin) runs too, with the service's list.
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=hosts.mcp_settings(),
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        request = Request(scope)
        try:
            caller = await anyio.to_thread.run_sync(self._caller, request)
        except Refused as exc:
            answer = error(exc.status, "refused", exc.message)
            if exc.status == 401:
                answer.headers["WWW-Authenticate"] = "Bearer"
            await answer(scope, receive, send)
            return
        except InvalidInputError as exc:
            field = {"field": "query.namespace", "problem": str(exc)}
            await error(422, "invalid_input", str(exc), [field])(scope, receive, send)
            return
        await self.server.session_manager.handle_request(
            dict(scope, **{_CALLER: caller}), receive, send
        )

    def _caller(self, request: Request) -> tuple[str, ApiKey | None]:
        key = self.access.caller(request.headers.get("authorization"))
        asked = parse_qs(request.url.query).get("namespace", [])
        named = asked[0] if asked else request.headers.get(NAMESPACE_HEADER)
        if not named:
            raise InvalidInputError(
                f"name the namespace: {PATH}?namespace=NS or the header {NAMESPACE_HEADER}"
            )
        return Access.permitted(key, named, "read"), key

    def _target(self, ctx: Context, scope: str) -> PartnerMemory:
        request = ctx.request_context.request
        caller = getattr(request, "scope", {}).get(_CALLER)
        if caller is None:
            raise ToolError("this server acts only on requests that came through /mcp")
        namespace, key = caller
        try:
            Access.permitted(key, namespace, scope)  # the tool's own scope, as the API checks it
            return self.access.memory(namespace, create=scope == "write")
        except Refused as exc:
            raise ToolError(exc.message) from exc
