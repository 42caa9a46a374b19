"""Running the HTTP service: checks before binding, and the app each worker builds.

Several workers are separate processes sharing one database, which only
PostgreSQL supports; each builds its own `MemoryService` from the
environment (`app_from_env`), so the command passes its options there.
"""

from __future__ import annotations

import ipaddress
import logging
import logging.config
import os
import sys
from collections.abc import Sequence

from partner_memory.config import Settings
from partner_memory.errors import ConfigurationError
from partner_memory.http import DEFAULT_HEADER_TIMEOUT_S, DEFAULT_MAX_BODY
from partner_memory.http.app import create_app
from partner_memory.http.asgi import ASGIApp
from partner_memory.http.hosts import ENVIRONMENT_VARIABLE as _HOSTS_VARIABLE
from partner_memory.http.hosts import HostPolicy
from partner_memory.http.memory_trim import MemoryTrimmer
from partner_memory.http.protocol import ENVIRONMENT_VARIABLE as _HEADER_VARIABLE
from partner_memory.http.protocol import HeaderDeadlineProtocol
from partner_memory.keys import KeyRing
from partner_memory.service import MemoryService
from partner_memory.settings import StoreSettings
from partner_memory.telemetry import sdk
from partner_memory.telemetry.logs import log_config
from partner_memory.telemetry.sdk import require_sdk

_MAX_BODY_VARIABLE = "PARTNER_MEMORY_MAX_BODY"
_METRICS_PORT_VARIABLE = "PARTNER_MEMORY_METRICS_PORT"

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_serving(
    database: str, host: str, workers: int, *, insecure: bool, metrics_port: int | None = None
) -> None:
    """Refuse what would not work or not be safe, before anything listens."""
    if workers < 1:
        raise ConfigurationError(f"--workers must be 1 or more, got {workers}")
    if metrics_port is not None:
        if workers > 1:
            raise ConfigurationError(
                "--metrics-port serves one process's metrics: with several workers, push them"
                " over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT) or scrape each worker's /metrics"
            )
        require_sdk()
    postgres = database.startswith(("postgresql://", "postgres://"))
    if workers > 1 and not postgres:
        raise ConfigurationError(
            "several workers need PostgreSQL: an SQLite file is served by one process (--workers 1)"
        )
    store = StoreSettings.from_env().open(database)
    try:
        keyed = KeyRing(store).any_live()
    finally:
        store.close()
    if keyed:
        return
    if not (is_loopback(host) or insecure):
        raise ConfigurationError(
            f"refusing to serve {host} without any API key: create one with"
            f" `partner-memory keys create --db {database}`, or pass --insecure"
        )
    reach = "any local process" if is_loopback(host) else "anyone who can reach it"
    print(
        f"partner-memory: warning: {database} has no API key, so {reach} can read, write"
        " and forget every namespace; create one with"
        f" `partner-memory keys create --db {database} --namespaces '*' --scope admin`",
        file=sys.stderr,
        flush=True,
    )


def _announce(what: str, host: str, port: int, note: str) -> str:
    """Say where the server listens (uvicorn's own lines are kept to warnings), on
    stderr so a piped stdout stays the program's."""
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    print(f"partner-memory: {what} on {url} ({note})", file=sys.stderr, flush=True)
    return url


def app_from_env() -> ASGIApp:
    """The app of one worker: the database and settings of the environment."""
    max_body = int(os.environ.get(_MAX_BODY_VARIABLE, DEFAULT_MAX_BODY))
    hosts = HostPolicy.from_env_value(os.environ.get(_HOSTS_VARIABLE, "*"))
    exposition = sdk.configure()  # the OTEL_* variables; before any instrument is made
    port = os.environ.get(_METRICS_PORT_VARIABLE)
    if port and exposition is not None:
        exposition.serve_on(int(port), hosts.permits)  # the API's Host policy
    service = MemoryService.open()  # PARTNER_MEMORY_DB and the rest of the environment
    MemoryTrimmer().start()  # a burst's freed memory goes back to the system
    return create_app(
        service, max_body=max_body, hosts=hosts, owns_service=True, metrics=exposition
    )


def serve(
    database: str,
    host: str,
    port: int,
    *,
    workers: int,
    max_body: int,
    insecure: bool,
    allowed_hosts: Sequence[str] = (),
    header_timeout: float = DEFAULT_HEADER_TIMEOUT_S,
    log_format: str = "text",
    metrics_port: int | None = None,
    pg_read_url: str | None = None,
) -> None:
    import uvicorn

    if not 0 < header_timeout <= 3600:
        raise ConfigurationError(
            f"--header-timeout must be seconds in (0, 3600], got {header_timeout:g}"
        )
    hosts = HostPolicy.for_serving(host, port, allowed_hosts)
    logging_config = log_config(log_format)
    if pg_read_url is not None:  # read by every worker's settings, as the database is
        os.environ["PARTNER_MEMORY_PG_READ_URL"] = pg_read_url
    check_serving(database, host, workers, insecure=insecure, metrics_port=metrics_port)
    if metrics_port is not None and metrics_port == port:
        raise ConfigurationError(f"--metrics-port must differ from --port ({port})")
    if hosts.allowed is None and "*" not in allowed_hosts:
        log.warning(
            "serving %s: requests naming any Host are answered; name this service's host"
            " names with --allowed-host to refuse the others",
            host,
        )
    os.environ["PARTNER_MEMORY_DB"] = database
    os.environ[_MAX_BODY_VARIABLE] = str(max_body)
    os.environ[_HOSTS_VARIABLE] = hosts.env_value()
    os.environ[_HEADER_VARIABLE] = str(header_timeout)
    if metrics_port is not None:
        os.environ[_METRICS_PORT_VARIABLE] = str(metrics_port)
    _announce("serving the memory API", host, port, "API docs at /docs")
    if metrics_port is not None:
        _announce("serving metrics", "127.0.0.1", metrics_port, "Prometheus text at /metrics")
    if logging_config is not None:
        logging.config.dictConfig(logging_config)  # this process's lines, before the workers
    uvicorn.run(
        "partner_memory.http.serve:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http=HeaderDeadlineProtocol,
        log_level="warning",
        log_config=logging_config or uvicorn.config.LOGGING_CONFIG,
        # uvicorn's own access lines carry query strings: ours (partner_memory.access, in
        # the JSON format) carry the route template, never a body or a key
        access_log=False,
    )


def inspect(database: str, port: int, *, browser: bool, allowed_hosts: Sequence[str] = ()) -> None:
    """The inspector on loopback over a read-only store: nothing here can change memory."""
    import threading
    import webbrowser

    import uvicorn

    hosts = HostPolicy.for_serving("127.0.0.1", port, allowed_hosts)
    env = Settings.from_env()
    store = env.store.open(database, read_only=True)
    service = MemoryService(store, owns_store=True, idle_timer=False, **env.runtime_options())
    url = _announce("the inspector", "127.0.0.1", port, "read-only")
    if browser:
        threading.Timer(1.0, webbrowser.open, args=(url,)).start()
    uvicorn.run(
        create_app(service, hosts=hosts, owns_service=True),
        host="127.0.0.1",
        port=port,
        http=HeaderDeadlineProtocol,
        log_level="warning",
        access_log=False,
    )
