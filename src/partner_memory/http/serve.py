"""Running the HTTP service: checks before binding, and the app each worker builds.

Several workers are separate processes sharing one database, which only
PostgreSQL supports; each builds its own `MemoryService` from the
environment (`app_from_env`), so the command passes its options there.
"""

from __future__ import annotations

import ipaddress
import os

from partner_memory.errors import ConfigurationError
from partner_memory.http import DEFAULT_MAX_BODY
from partner_memory.http.app import ASGIApp, create_app
from partner_memory.keys import KeyRing
from partner_memory.service import MemoryService
from partner_memory.settings import StoreSettings
from partner_memory.store import open_store

_MAX_BODY_VARIABLE = "PARTNER_MEMORY_MAX_BODY"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_serving(database: str, host: str, workers: int, *, insecure: bool) -> None:
    """Refuse what would not work or not be safe, before anything listens."""
    if workers < 1:
        raise ConfigurationError(f"--workers must be 1 or more, got {workers}")
    postgres = database.startswith(("postgresql://", "postgres://"))
    if workers > 1 and not postgres:
        raise ConfigurationError(
            "several workers need PostgreSQL: an SQLite file is served by one process (--workers 1)"
        )
    if is_loopback(host) or insecure:
        return
    store = open_store(database)
    try:
        keyed = KeyRing(store).any_live()
    finally:
        store.close()
    if not keyed:
        raise ConfigurationError(
            f"refusing to serve {host} without any API key: create one with"
            " `partner-memory keys create`, or pass --insecure"
        )


def app_from_env() -> ASGIApp:
    """The app of one worker: the database and settings of the environment."""
    max_body = int(os.environ.get(_MAX_BODY_VARIABLE, DEFAULT_MAX_BODY))
    service = MemoryService.open(StoreSettings.from_env().database)
    return create_app(service, max_body=max_body, owns_service=True)


def serve(
    database: str, host: str, port: int, *, workers: int, max_body: int, insecure: bool
) -> None:
    import uvicorn

    check_serving(database, host, workers, insecure=insecure)
    os.environ["PARTNER_MEMORY_DB"] = database
    os.environ[_MAX_BODY_VARIABLE] = str(max_body)
    uvicorn.run(
        "partner_memory.http.serve:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        access_log=False,  # paths carry namespaces and ids; bodies and keys are never logged
    )


def inspect(database: str, port: int, *, browser: bool) -> None:
    """The inspector on loopback over a read-only store: nothing here can change memory."""
    import threading
    import webbrowser

    import uvicorn

    store = open_store(database, read_only=True)
    service = MemoryService(store, owns_store=True, idle_timer=False)
    url = f"http://127.0.0.1:{port}/"
    if browser:
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    uvicorn.run(
        create_app(service, owns_service=True),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
    )
