"""`partner-memory forget ...`: remove memory from every path, one transaction each."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from partner_memory.cli import render
from partner_memory.cli.app import Db, Json, Namespace, app, opened_memory, opened_service
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
def _memory(
    db: str, namespace: str, purge: bool, as_json: bool, said: dict[str, Any]
) -> Iterator[PartnerMemory]:
    """The namespace's memory over a writable store, errors reported; purged after.
    The command fills `said` with its document and `text` with its line."""
    with reported(), opened_memory(db, namespace, write=True) as memory:
        yield memory
        document = {"namespace": namespace} | said
        text = document.pop("text")
        if purge:
            document["purged"] = _purged(memory.service, quiet=as_json)
        if as_json:
            render.print_json(document)
        else:
            render.console.print(text)


def _purged(service: MemoryRuntime, *, quiet: bool = False) -> list[str]:
    started = time.monotonic()
    rewritten = service.purge()
    took = time.monotonic() - started
    if not quiet:
        render.console.print(f"purged {', '.join(rewritten)} in {took:.1f} s")
    return rewritten


@app.command()
def purge(db: Db = DEFAULT_DATABASE, as_json: Json = False) -> None:
    """Remove forgotten text from the database files: on PostgreSQL a forget leaves old
    row versions there until the tables are rewritten (schedule this in a quiet hour)."""
    with reported(), opened_service(db) as service:
        rewritten = _purged(service, quiet=as_json)
        if as_json:
            render.print_json({"purged": rewritten})


@forget.command("message")
def forget_message(
    message_ids: Annotated[list[str], typer.Argument(help="Message ids.", show_default=False)],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    purge: Purge = False,
    as_json: Json = False,
) -> None:
    """Forget messages; the slices that held them are summarised again from the rest."""
    said: dict[str, Any] = {}
    with _memory(db, namespace, purge, as_json, said) as memory:
        count = memory.forget_messages(message_ids)
        said |= {"message_count": count, "text": f"forgot {count} message(s) in {namespace!r}"}


@forget.command("slice")
def forget_slice(
    unit: Annotated[str, typer.Argument(help="Unit id, or its first characters.")],
    slice_id: Annotated[
        str, typer.Argument(metavar="SLICE", help="Slice id, or its first characters.")
    ],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    purge: Purge = False,
    as_json: Json = False,
) -> None:
    """Forget a slice: its summary and every message it covers."""
    said: dict[str, Any] = {}
    with _memory(db, namespace, purge, as_json, said) as memory:
        unit = memory.core.resolve_unit_id(unit)
        slice_id = memory.core.resolve_slice_id(unit, slice_id)
        count = memory.forget_slice(unit, slice_id)
        said |= {
            "unit_id": unit,
            "slice_id": slice_id,
            "message_count": count,
            "text": f"forgot slice {slice_id} and its {count} message(s)",
        }


@forget.command("unit")
def forget_unit(
    unit: Annotated[str, typer.Argument(help="Unit id, or its first characters.")],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    purge: Purge = False,
    as_json: Json = False,
) -> None:
    """Forget a whole unit (one memory session) with its slices."""
    said: dict[str, Any] = {}
    with _memory(db, namespace, purge, as_json, said) as memory:
        unit = memory.core.resolve_unit_id(unit)
        memory.forget_unit(unit)
        said |= {"unit_id": unit, "text": f"forgot unit {unit}"}


@forget.command("namespace")
def forget_namespace(
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    yes: Annotated[bool, typer.Option("--yes", help="Really forget all of it.")] = False,
    purge: Purge = False,
    as_json: Json = False,
) -> None:
    """Forget a namespace and everything in it."""
    if not yes:
        with reported():
            raise InvalidInputError(f"forgetting all of {namespace!r} needs --yes")
    said: dict[str, Any] = {}
    with _memory(db, namespace, purge, as_json, said) as memory:
        memory.service.forget_namespace(namespace)
        said["text"] = f"forgot namespace {namespace!r}"
