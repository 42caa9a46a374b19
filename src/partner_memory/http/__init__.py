"""The HTTP service: an ASGI app over one `MemoryService` (FastAPI, served by uvicorn)."""

#: Largest request body accepted by default (bytes); a larger one is 413.
DEFAULT_MAX_BODY = 4 * 1024 * 1024
#: Seconds a client has to send a request's headers, by default (then 408).
DEFAULT_HEADER_TIMEOUT_S = 10.0
