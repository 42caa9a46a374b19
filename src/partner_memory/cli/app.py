"""Commands: each opens the store, calls one library function and renders the result."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from partner_memory.cli import render
from partner_memory.cli.errors import reported
from partner_memory.config import Settings
from partner_memory.core import MAX_PAGE_SIZE, MemoryCore
from partner_memory.documents import namespaces_document, slice_document, unit_document
from partner_memory.errors import InvalidInputError
from partner_memory.interop import copy_memory, export_partner_state, import_partner_state
from partner_memory.memory import PartnerMemory
from partner_memory.model import check_timestamp
from partner_memory.queries import MemoryQueries
from partner_memory.service import MemoryService
from partner_memory.settings import DEFAULT_DATABASE, DEFAULT_NAMESPACE, StoreSettings
from partner_memory.store import MemoryStore

app = typer.Typer(
    name="partner-memory",
    help="Inspect and move the long-term memory of an agent.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        print(f"partner-memory {package_version('partner-memory')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Inspect and move the long-term memory of an agent."""


Db = Annotated[
    str,
    typer.Option(
        "--db",
        envvar="PARTNER_MEMORY_DB",
        help="SQLite file path or postgresql:// URL.",
        show_default=True,
    ),
]
Namespace = Annotated[
    str,
    typer.Option(
        "--namespace",
        "-n",
        envvar="PARTNER_MEMORY_NAMESPACE",
        help="Whose memory: one agent, or one user of an agent.",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


@contextmanager
def opened_store(db: str, *, write: bool) -> Iterator[MemoryStore]:
    """The store for one command; read commands open it read-only, so they never take
    the write lock (they answer while another process writes) and never create a file."""
    store = StoreSettings.from_env().open(db, read_only=not write)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def opened_service(db: str) -> Iterator[MemoryService]:
    """A service over a writable store for one command (no idle timer), closed after."""
    options = Settings.from_env().runtime_options()
    with (
        opened_store(db, write=True) as store,
        MemoryService(store, idle_timer=False, **options) as service,
    ):
        yield service


@contextmanager
def opened_memory(db: str, namespace: str, *, write: bool) -> Iterator[PartnerMemory]:
    """An existing namespace's memory for one command (no idle timer), closed after."""
    options = Settings.from_env().runtime_options()
    with (
        opened_store(db, write=write) as store,
        PartnerMemory(store, namespace, idle_timer=False, create=False, **options) as memory,
    ):
        yield memory


@contextmanager
def _core(db: str, namespace: str, *, write: bool = False) -> Iterator[MemoryCore]:
    """An existing namespace; nothing is created."""
    with opened_store(db, write=write) as store:
        yield MemoryCore(store, namespace, create=False)


def epoch_ms(text: str | None, option: str) -> int | None:
    """A time flag: an ISO date or date-time (UTC unless it says otherwise), or epoch
    milliseconds as JSON output prints them, so a `timestamp` can be passed back."""
    if text is None:
        return None
    if text.isascii() and text.isdigit():
        return check_timestamp(int(text), option)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(
            f"{option} {text!r} is neither an ISO date or date-time"
            " (e.g. 2024-05-08 or 2024-05-08T13:56) nor epoch milliseconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


@app.command()
def units(
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    limit: Annotated[int, typer.Option(help="Units per page.")] = 20,
    offset: Annotated[int, typer.Option(help="Units to skip.")] = 0,
    since: Annotated[str | None, typer.Option(help="Updated at or after (ISO, UTC).")] = None,
    until: Annotated[str | None, typer.Option(help="Updated before (ISO, UTC).")] = None,
    after: Annotated[
        str | None, typer.Option(help="Start after this unit (the previous page's last).")
    ] = None,
    as_json: Json = False,
) -> None:
    """List memory units, newest first."""
    with reported(), _core(db, namespace) as core:
        page = core.list_units(
            limit=limit,
            offset=offset,
            since=epoch_ms(since, "--since"),
            until=epoch_ms(until, "--until"),
            after=None if after is None else core.resolve_unit_id(after),
        )
        if as_json:
            render.print_json({"namespace": namespace} | page.to_dict())
            return
        shown = f"{page.offset + 1}-{page.offset + len(page.units)}" if page.units else "none"
        title = f"units of {namespace!r}: {shown} of {page.total}"
        render.console.print(render.units_table(page.units, title))


@app.command()
def show(
    unit: Annotated[str, typer.Argument(help="Unit id, or its first characters.")],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    messages: Annotated[bool, typer.Option("--messages", help="Also print every message.")] = False,
    as_json: Json = False,
) -> None:
    """Show one unit: its slices, and with --messages its messages."""
    with reported(), _core(db, namespace) as core:
        unit = core.resolve_unit_id(unit)
        if as_json:
            render.print_json(unit_document(core, unit, messages=messages))
            return
        info = core.get_unit_info(unit)
        slices = core.list_slices(unit)
        stored = core.read_messages(unit) if messages else []
        render.console.print(render.units_table([info], f"unit in {namespace!r}"))
        render.console.print(render.slices_table(slices))
        if messages:
            render.console.print(render.messages_table(stored, 0))


@app.command("slice")
def slice_(
    unit: Annotated[str, typer.Argument(help="Unit id, or its first characters.")],
    slice_id: Annotated[
        str, typer.Argument(metavar="SLICE", help="Slice id, or its first characters.")
    ],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    as_json: Json = False,
) -> None:
    """Show a slice's summary, where each of its sentences came from, and the original
    messages it summarises."""
    with reported(), _core(db, namespace) as core:
        unit, slice_id = core.resolve_slice(unit, slice_id)
        if as_json:
            render.print_json(slice_document(core, unit, slice_id))
            return
        read = core.read_slice(unit, slice_id)
        render.console.print(render.slices_table([read.memory_slice]))
        render.console.print(render.provenance_table(read.provenance))
        render.console.print(render.messages_table(read.messages, read.memory_slice.start_index))


@app.command()
def session(
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    refresh: Annotated[
        bool,
        typer.Option(
            "--refresh", help="Start a new memory session (next rolling opens a new unit)."
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Print the current memory session id, or start a new one."""
    with reported(), _core(db, namespace, write=refresh) as core:
        session_id = core.refresh_memory_session() if refresh else core.memory_session_id
        if as_json:
            render.print_json({"namespace": namespace, "memory_session_id": session_id})
        else:
            render.console.print(session_id)


@app.command()
def namespaces(
    db: Db = DEFAULT_DATABASE,
    limit: Annotated[int, typer.Option(help="Namespaces per page.")] = 100,
    after: Annotated[
        str | None, typer.Option(help="Start after this name (the previous page's last).")
    ] = None,
    as_json: Json = False,
) -> None:
    """List namespaces by name, with their session and unit count."""
    with reported():
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise InvalidInputError(f"limit must be between 1 and {MAX_PAGE_SIZE}")
        with opened_store(db, write=False) as store:
            queries = MemoryQueries(store)
            found = queries.namespaces(limit=limit + 1, after=after)
            total = queries.count_namespaces()
        page, more = found[:limit], len(found) > limit
        next_after = page[-1].name if more else None
        if as_json:
            render.print_json(namespaces_document(page, total=total, limit=limit, more=more))
            return
        render.console.print(render.namespaces_table(page))
        if next_after is not None:
            render.console.print(
                f"{len(page)} of {total:,}; next page: --after {escape(repr(next_after))}"
            )


@app.command("import-partner")
def import_partner(
    state_dir: Annotated[Path, typer.Argument(help="The reference's state directory.")],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    replace_window: Annotated[
        bool,
        typer.Option(
            "--replace-window",
            help="Let core/cognition.json replace a window holding messages not yet rolled.",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Import a reference state directory (all or nothing; importing twice changes nothing)."""
    with reported(), opened_store(db, write=True) as store:
        report = import_partner_state(
            store, state_dir, namespace=namespace, replace_window=replace_window
        )
        if as_json:
            render.print_json(report.to_dict())
            return
        render.console.print(
            f"imported into {namespace!r}: {report.units_created} units created,"
            f" {report.units_extended} extended, {report.units_unchanged} unchanged;"
            f" {report.messages_added} messages, {report.slices_added} slices added"
        )
        for note in report.skipped:
            render.console.print(f"skipped: {note}")
        for note in report.normalised:
            render.console.print(f"normalised: {note}")


@app.command("export-partner")
def export_partner(
    out_dir: Annotated[Path, typer.Argument(help="Directory to write the state into.")],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    as_json: Json = False,
) -> None:
    """Write a namespace as a state directory the reference runtime can load."""
    with reported(), _core(db, namespace) as core:
        report = export_partner_state(core, out_dir)
        if as_json:
            render.print_json(report.to_dict())
            return
        render.console.print(
            f"exported {namespace!r} to {out_dir}: {report.units} units,"
            f" {report.messages} messages, {report.slices} slices"
        )


@app.command("copy")
def copy_command(
    source: Annotated[str, typer.Argument(help="The database to copy from (path or URL).")],
    destination: Annotated[
        str, typer.Argument(help="The database to copy into; created when missing.")
    ],
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace", "-n", help="Copy only this namespace; repeatable.", show_default=False
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Copy memory losslessly between databases (SQLite <-> PostgreSQL), or back it up."""
    with (
        reported(),
        opened_store(source, write=False) as src,
        opened_store(destination, write=True) as dst,
    ):
        report = copy_memory(src, dst, namespaces=namespace or ())
        if as_json:
            render.print_json(report.to_dict())
            return
        render.console.print(
            f"copied {len(report.namespaces)} namespace(s) from {escape(report.source)} to"
            f" {escape(report.destination)}: {report.units:,} units, {report.messages:,}"
            f" messages, {report.rollings:,} rollings"
        )


#: Options every command takes that may also stand before the command's name.
_LEADING = frozenset({"--db", "--namespace", "-n"})


def hoisted(args: list[str]) -> list[str]:
    """`--db X -n Y units ...` as `units --db X -n Y ...`: the options go to the command."""
    moved: list[str] = []
    rest = list(args)
    while rest:
        head = rest[0]
        name = head.split("=", 1)[0]
        if name not in _LEADING:
            break
        if "=" in head or len(rest) < 2:
            moved.append(rest.pop(0))
        else:
            moved += [rest.pop(0), rest.pop(0)]
    if not moved or not rest or rest[0].startswith("-"):
        return list(args)
    return [rest[0], *moved, *rest[1:]]


def main() -> None:
    app(args=hoisted(sys.argv[1:]))
