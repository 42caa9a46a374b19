"""/metrics: the process's metrics in Prometheus' text format, behind the API's keys.

The figures cover every namespace, so once keys exist a scraper needs one
that reads them all (`keys create --namespaces '*' --scope read`). Without
the telemetry extra, or when the application installed its own SDK, there
is nothing to expose and the answer says why.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from partner_memory.access import Access, Refused
from partner_memory.http.answers import error
from partner_memory.http.asgi import Receive, Send
from partner_memory.telemetry.sdk import EXTRA_HINT, Exposition


class MetricsRoute:
    """The ASGI endpoint of /metrics."""

    def __init__(self, access: Access, exposition: Exposition | None) -> None:
        self.access = access
        self.exposition = exposition

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        request = Request(scope)
        try:
            key = self.access.caller(request.headers.get("authorization"))
        except Refused as refused:
            await error(refused.status, "refused", refused.message)(scope, receive, send)
            return
        if key is not None:
            request.state.key_id = key.id
            if key.namespaces != "*" or not key.reaches("read"):
                message = "metrics cover every namespace: they need a key reading '*'"
                await error(403, "refused", message)(scope, receive, send)
                return
        if self.exposition is None:
            message = f"no metrics are exposed here: {EXTRA_HINT}"
            await error(503, "unavailable", message)(scope, receive, send)
            return
        body, content_type = await anyio.to_thread.run_sync(self.exposition.render)
        await Response(body, media_type=content_type)(scope, receive, send)
