"""`partner-memory forget ...`: remove memory from every path, one transaction each."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from partner_memory.cli import render
from partner_memory.cli.app import Db, Namespace, app, opened_memory, opened_service
from partner_memory.cli.errors import reported
from partner_memory.errors import InvalidInputError
from partner_memory.memory import PartnerMemory
from partner_memory.runtime import MemoryRuntime
from partner_memory.settings import DEFAULT_DATABASE, DEFAULT_NAMESPACE

forget = typer.Typer(
    help="Forget messages, a slice, a unit or a namespace: the text leaves every path"
    " (reading, recall, context, exports, summaries); what was forgotten and when is recorded.",
    no_args_is_help=True,
)
app.add_typer(forget, name="forget")


Purge = Annotated[
    bool,
    typer.Option(
        "--purge",
        help="Then remove the text from the database files too (PostgreSQL: rewrites"
        " the tables, locking each while it does).",
    ),
]


@contextmanager
def _memory(db: str, namespace: str, purge: bool = False) -> Iterator[PartnerMemory]:
    """The namespace's memory over a writable store, errors reported; purged after."""
    with reported(), opened_memory(db, namespace, write=True) as memory:
        yield memory
        if purge:
            _purged(memory.service)


def _purged(service: MemoryRuntime) -> None:
    started = time.monotonic()
    rewritten = service.purge()
    took = time.monotonic() - started
    render.console.print(f"purged {', '.join(rewritten)} in {took:.1f} s")


@app.command()
def purge(db: Db = DEFAULT_DATABASE) -> None:
    """Remove forgotten text from the database files: on PostgreSQL a forget leaves old
    row versions there until the tables are rewritten (schedule this in a quiet hour)."""
    with reported(), opened_service(db) as service:
        _purged(service)


@forget.command("message")
def forget_message(
    message_ids: Annotated[list[str], typer.Argument(help="Message ids.", show_default=False)],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    purge: Purge = False,
) -> None:
    """Forget messages; the slices that held them are summarised again from the rest."""
    with _memory(db, namespace, purge) as memory:
        count = memory.forget_messages(message_ids)
        render.console.print(f"forgot {count} message(s) in {namespace!r}")


@forget.command("slice")
def forget_slice(
    unit: Annotated[str, typer.Argument(help="Unit id, or its first characters.")],
    slice_id: Annotated[
        str, typer.Argument(metavar="SLICE", help="Slice id, or its first characters.")
    ],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    purge: Purge = False,
) -> None:
    """Forget a slice: its summary and every message it covers."""
    with _memory(db, namespace, purge) as memory:
        unit = memory.core.resolve_unit_id(unit)
        slice_id = memory.core.resolve_slice_id(unit, slice_id)
        count = memory.forget_slice(unit, slice_id)
        render.console.print(f"forgot slice {slice_id} and its {count} message(s)")


@forget.command("unit")
def forget_unit(
    unit: Annotated[str, typer.Argument(help="Unit id, or its first characters.")],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    purge: Purge = False,
) -> None:
    """Forget a whole unit (one memory session) with its slices."""
    with _memory(db, namespace, purge) as memory:
        unit = memory.core.resolve_unit_id(unit)
        memory.forget_unit(unit)
        render.console.print(f"forgot unit {unit}")


@forget.command("namespace")
def forget_namespace(
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    yes: Annotated[bool, typer.Option("--yes", help="Really forget all of it.")] = False,
    purge: Purge = False,
) -> None:
    """Forget a namespace and everything in it."""
    if not yes:
        with reported():
            raise InvalidInputError(f"forgetting all of {namespace!r} needs --yes")
    with _memory(db, namespace, purge) as memory:
        memory.service.forget_namespace(namespace)
        render.console.print(f"forgot namespace {namespace!r}")
