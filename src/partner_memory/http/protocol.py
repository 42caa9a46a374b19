"""uvicorn's HTTP protocol with a deadline for a request's headers.

uvicorn times out an idle keep-alive connection, but not one that sends its
headers a byte at a time: each byte restarts nothing and finishes nothing, so
a few hundred such connections hold the server's sockets for as long as the
client likes. Here a connection whose request headers are not complete
within `header_timeout` seconds of the connection (or of the request's first
byte) is closed with a 408.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from partner_memory.http import DEFAULT_HEADER_TIMEOUT_S

#: How `serve --header-timeout` reaches every worker process.
ENVIRONMENT_VARIABLE = "PARTNER_MEMORY_HEADER_TIMEOUT"


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol`, closing connections whose headers come too slowly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        # uvicorn builds the protocol itself, in each worker: the setting comes by the
        # environment, as the service's other options do
        self.header_timeout = float(
            os.environ.get(ENVIRONMENT_VARIABLE) or DEFAULT_HEADER_TIMEOUT_S
        )

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _too_slow(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            self.transport.close()
