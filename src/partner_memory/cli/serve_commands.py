"""`partner-memory serve` and `partner-memory keys ...`: the memory as an HTTP service."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from partner_memory.cli import render
from partner_memory.cli.app import Db, Json, Namespace, app, opened_store
from partner_memory.cli.errors import reported
from partner_memory.http import DEFAULT_HEADER_TIMEOUT_S, DEFAULT_MAX_BODY
from partner_memory.keys import SCOPES, KeyRing
from partner_memory.settings import DEFAULT_DATABASE, DEFAULT_NAMESPACE

AllowedHost = Annotated[
    list[str],
    typer.Option(
        "--allowed-host",
        help="Also serve requests naming this Host (a proxy's name; NAME or NAME:PORT; * for"
        " any); repeatable. Loopback names at the port are always served.",
        show_default=False,
    ),
]

keys = typer.Typer(
    help="API keys of the HTTP service: a key opens a namespace pattern up to a scope.",
    no_args_is_help=True,
)
app.add_typer(keys, name="keys")


@app.command()
def serve(
    db: Db = DEFAULT_DATABASE,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8000,
    workers: Annotated[
        int, typer.Option(help="Worker processes (more than one only on PostgreSQL).")
    ] = 1,
    max_body: Annotated[
        int, typer.Option(help="Largest request body in bytes (larger: 413).", min=1)
    ] = DEFAULT_MAX_BODY,
    insecure: Annotated[
        bool, typer.Option(help="Serve a non-loopback address without any API key.")
    ] = False,
    allowed_host: AllowedHost = [],  # noqa: B006 - typer reads the default, never mutates it
    header_timeout: Annotated[
        float, typer.Option(help="Seconds a client has to send a request's headers (then 408).")
    ] = DEFAULT_HEADER_TIMEOUT_S,
    log_format: Annotated[
        str,
        typer.Option(
            help="text, or json: one JSON object per request and per notable event, on stderr."
        ),
    ] = "text",
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Also serve /metrics (Prometheus text, no key) on this loopback port.",
            min=1,
            max=65535,
        ),
    ] = None,
    pg_read_url: Annotated[
        str | None,
        typer.Option(
            envvar="PARTNER_MEMORY_PG_READ_URL",
            help="A PostgreSQL read replica for the listings (namespaces, logs, the inspector).",
        ),
    ] = None,
) -> None:
    """Serve the memory over HTTP (/v1, /mcp, the inspector at /, /docs, /metrics, /healthz,
    /readyz)."""
    from partner_memory.http.serve import serve as run

    with reported():
        run(
            db,
            host,
            port,
            workers=workers,
            max_body=max_body,
            insecure=insecure,
            allowed_hosts=allowed_host,
            header_timeout=header_timeout,
            log_format=log_format,
            metrics_port=metrics_port,
            pg_read_url=pg_read_url,
        )


@app.command()
def inspect(
    db: Db = DEFAULT_DATABASE,
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8001,
    browser: Annotated[bool, typer.Option(help="Open the page in a browser.")] = True,
    allowed_host: AllowedHost = [],  # noqa: B006 - typer reads the default, never mutates it
) -> None:
    """Inspect memory in a browser: the inspector, read-only, on loopback."""
    from partner_memory.http.serve import inspect as run

    with reported():
        run(db, port, browser=browser, allowed_hosts=allowed_host)


@keys.command("create")
def create_key(
    namespaces: Annotated[
        str, typer.Option(help="Namespaces the key opens, a glob: 'agent-42/*', '*'.")
    ],
    scope: Annotated[str, typer.Option(help=f"One of {', '.join(SCOPES)}.")] = "read",
    db: Db = DEFAULT_DATABASE,
    as_json: Json = False,
) -> None:
    """Create a key and print it - once: only its hash is kept."""
    with reported(), opened_store(db, write=True) as store:
        made, token = KeyRing(store).create(namespaces, scope)
        if as_json:
            render.print_json({"key": made.to_dict(), "token": token})
            return
        render.console.print(token)
        render.warn(f"key {made.id}: store it now, it is not shown again")


@keys.command("list")
def list_keys(db: Db = DEFAULT_DATABASE, as_json: Json = False) -> None:
    """Every key: id, namespaces, scope, and when it was made or revoked (never a secret)."""
    with reported(), opened_store(db, write=False) as store:
        found = KeyRing(store).list()
        if as_json:
            render.print_json({"keys": [k.to_dict() for k in found]})
            return
        table = Table(title="API keys", title_justify="left")
        for column in ("id", "namespaces", "scope", "created (UTC)", "revoked (UTC)"):
            table.add_column(column)
        for key in found:
            table.add_row(
                key.id,
                escape(key.namespaces),
                key.scope,
                render.when(key.created_at),
                render.when(key.revoked_at),
            )
        render.console.print(table)


@keys.command("revoke")
def revoke_key(
    key_id: Annotated[str, typer.Argument(metavar="ID", help="The key's id (`keys list`).")],
    db: Db = DEFAULT_DATABASE,
    as_json: Json = False,
) -> None:
    """Revoke a key: every worker refuses it from the next request on."""
    with reported(), opened_store(db, write=True) as store:
        KeyRing(store).revoke(key_id)
        if as_json:
            render.print_json({"key_id": key_id, "revoked": True})
            return
        render.console.print(f"revoked {key_id}")


@app.command("mcp")
def mcp_stdio(db: Db = DEFAULT_DATABASE, namespace: Namespace = DEFAULT_NAMESPACE) -> None:
    """Serve one namespace as MCP tools over stdio, for an MCP client that starts it."""
    from partner_memory.mcp_tools import build_server, one_namespace
    from partner_memory.service import MemoryService

    with reported():
        service = MemoryService.open(db)
        try:
            build_server(one_namespace(service, namespace)).run("stdio")
        finally:
            service.close()
