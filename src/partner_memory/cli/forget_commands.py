"""`partner-memory forget ...`: remove memory from every path, one transaction each."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from partner_memory.cli import render
from partner_memory.cli.app import Db, Json, Namespace, app, opened_memory, opened_service
from partner_memory.cli.errors import reported
from partner_memory.errors import InvalidInputError
from partner_memory.memory import PartnerMemory
from partner_memory.requests import ForgetRequest
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


@dataclass
class _Said:
    """What a forget command reports: a line, or (with --json) a document."""

    text: str = ""
    document: dict[str, Any] = field(default_factory=dict)


@contextmanager
def _memory(
    db: str, namespace: str, purge: bool, as_json: bool
) -> Iterator[tuple[PartnerMemory, _Said]]:
    """The namespace's memory over a writable store, errors reported; purged after,
    then what the command said, as a line or a document."""
    said = _Said()
    with reported(), opened_memory(db, namespace, write=True) as memory:
        yield memory, said
        document = {"namespace": namespace} | said.document
        if purge:
            document["purged"] = _purged(memory.service, quiet=as_json)
        if as_json:
            render.print_json(document)
        else:
            render.console.print(said.text)


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
    with _memory(db, namespace, purge, as_json) as (memory, said):
        count = memory.forget(ForgetRequest.messages(message_ids))
        said.text = f"forgot {count} message(s) in {namespace!r}"
        said.document = {"message_count": count}


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
    with _memory(db, namespace, purge, as_json) as (memory, said):
        unit, slice_id = memory.core.resolve_slice(unit, slice_id)
        count = memory.forget(ForgetRequest.slice(unit, slice_id))
        said.text = f"forgot slice {slice_id} and its {count} message(s)"
        said.document = {"unit_id": unit, "slice_id": slice_id, "message_count": count}


@forget.command("unit")
def forget_unit(
    unit: Annotated[str, typer.Argument(help="Unit id, or its first characters.")],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    purge: Purge = False,
    as_json: Json = False,
) -> None:
    """Forget a whole unit (one memory session) with its slices."""
    with _memory(db, namespace, purge, as_json) as (memory, said):
        unit = memory.core.resolve_unit_id(unit)
        memory.forget(ForgetRequest.unit(unit))
        said.text = f"forgot unit {unit}"
        said.document = {"unit_id": unit}


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
    with _memory(db, namespace, purge, as_json) as (memory, said):
        memory.service.forget_namespace(namespace)
        said.text = f"forgot namespace {namespace!r}"
