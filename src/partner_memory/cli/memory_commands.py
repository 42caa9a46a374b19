"""Commands over the pipeline: ingest a transcript, print context, show LLM cost, chat."""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from functools import partial
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from partner_memory import markers
from partner_memory.cli import render
from partner_memory.cli.app import Db, Json, Namespace, app, opened_memory, opened_store
from partner_memory.cli.errors import reported
from partner_memory.config import Settings
from partner_memory.context import Domain
from partner_memory.core import MemoryCore
from partner_memory.documents import (
    context_document,
    rolling_document,
    stats_document,
    window_document,
)
from partner_memory.errors import ConfigurationError, InvalidInputError, LLMError, NotFoundError
from partner_memory.importers import import_parts, read_source
from partner_memory.ingest import (
    IngestReport,
    Transcript,
    ingest_transcripts,
    parse_transcript,
    read_transcript,
)
from partner_memory.ingest import Progress as IngestProgress
from partner_memory.memory import DEFAULT_DOMAINS, PartnerMemory
from partner_memory.queries import MemoryQueries
from partner_memory.rolling import ChatClient
from partner_memory.settings import DEFAULT_DATABASE, DEFAULT_NAMESPACE
from partner_memory.store import MemoryStore

CHAT_SYSTEM = (
    "You are a companion agent with a long-term memory. The <context> below holds what you"
    " remember of earlier conversations (dialog_history). Answer the user's latest message"
    " directly and naturally. If you decide not to answer, reply exactly NO_REPLY, optionally"
    " followed by a newline and a private note."
)


class TranscriptFormat(StrEnum):
    """`--format` of ingest: a choice, so the CLI library checks it and lists the values."""

    AUTO = "auto"
    JSONL = "jsonl"
    LOCOMO = "locomo"


@app.command("ingest")
def ingest_command(
    transcripts: Annotated[
        list[str],
        typer.Argument(
            help="JSON Lines of messages or LoCoMo files, in order; - reads standard input.",
            show_default=False,
        ),
    ],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    fmt: Annotated[
        TranscriptFormat, typer.Option("--format", help="How to read the transcripts.")
    ] = TranscriptFormat.AUTO,
    flush: Annotated[
        bool, typer.Option("--flush/--no-flush", help="Roll what is left at the end.")
    ] = True,
    as_json: Json = False,
) -> None:
    """Replay transcripts through rolling with their own timestamps, then summarise.

    Every transcript is read and checked before the first is recorded.
    """
    with reported():
        parsed = [_read(name, fmt) for name in transcripts]
        with opened_store(db, write=True) as store:
            reports = _ingest_all(store, namespace, parsed, flush=flush, quiet=as_json)
        if as_json:
            last = reports[-1]
            render.print_json(
                {
                    "namespace": namespace,
                    "transcripts": [report.to_dict() for report in reports],
                    "unit_count": last.units,
                    "slice_count": last.slices,
                    "rolling_totals": last.totals.to_dict(),
                }
            )
            return
        for report in reports:
            render.console.print(_report_table(report, namespace))


def _read(name: str, fmt: TranscriptFormat) -> Transcript:
    if name != "-":
        return read_transcript(name, fmt.value)
    try:
        text = sys.stdin.read()
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"stdin: not UTF-8 text (byte {exc.start})") from None
    return parse_transcript(text, "stdin", fmt.value)


def _progress(verb: str, quiet: bool) -> tuple[Progress, IngestProgress]:
    """A progress bar on a terminal (hidden otherwise), and the task each transcript gets."""
    bar = Progress(
        TextColumn(f"[bold]{verb}[/] {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=quiet or not sys.stderr.isatty(),
    )

    def task(name: str, total: int) -> Callable[[int], None]:
        return partial(bar.advance, bar.add_task(escape(name), total=total))

    return bar, task


def _ingest_all(
    store: MemoryStore, namespace: str, transcripts: list[Transcript], *, flush: bool, quiet: bool
) -> list[IngestReport]:
    """`ingest_transcripts` with a progress bar on a terminal and the fallbacks' warning."""
    bar, task = _progress("ingest", quiet)
    with bar:
        reports = ingest_transcripts(store, namespace, transcripts, flush=flush, progress=task)
    _warn_fallbacks(reports)
    return reports


def _warn_fallbacks(reports: list[IngestReport]) -> None:
    totals = reports[-1].totals
    render.warn_fallbacks(totals, totals.fallbacks - reports[0].fallbacks_before)


class SourceKind(StrEnum):
    """`--from` of import: a choice, so the CLI library checks it and lists the values."""

    OPENAI_AGENTS_SQLITE = "openai-agents-sqlite"
    LANGCHAIN_SQL = "langchain-sql"
    LETTA_AGENT_FILE = "letta-agent-file"


@app.command("import")
def import_command(
    source: Annotated[
        str,
        typer.Argument(
            help="The source: a SQLiteSession file, a LangChain history's database URL"
            " (sqlite:///PATH, postgresql://...) or path, or a Letta .af file.",
            show_default=False,
        ),
    ],
    kind: Annotated[
        SourceKind, typer.Option("--from", help="What the source is.", show_default=False)
    ],
    db: Db = DEFAULT_DATABASE,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Put everything into this namespace (default: one per session or agent).",
        ),
    ] = None,
    table: Annotated[
        str | None,
        typer.Option(help="The source's table, where it is not the library's default."),
    ] = None,
    flush: Annotated[
        bool, typer.Option("--flush/--no-flush", help="Roll what is left at the end.")
    ] = True,
    as_json: Json = False,
) -> None:
    """Bring conversations in from another memory system, replayed through rolling as
    `ingest` replays them. The source is read and checked whole before anything is
    written; importing it again adds nothing."""
    with reported():
        parts = read_source(kind.value, source, table=table, namespace=namespace)
        bar, task = _progress("import", as_json)
        with opened_store(db, write=True) as store, bar:
            report = import_parts(store, kind.value, source, parts, flush=flush, progress=task)
        for done in report.namespaces:
            _warn_fallbacks(done.reports)
        if as_json:
            render.print_json(report.to_dict())
            return
        table_out = Table(title=f"imported {source} ({kind.value})", title_justify="left")
        for column in ("namespace", "recorded / already stored", "left out", "blocks", "units"):
            table_out.add_column(column, justify="left" if column == "namespace" else "right")
        for done in report.namespaces:
            recorded = sum(r.recorded for r in done.reports)
            stored = sum(r.skipped for r in done.reports)
            table_out.add_row(
                escape(done.namespace),
                f"{recorded:,} / {stored:,}",
                f"{done.skipped:,}",
                str(done.blocks_held),
                f"{done.reports[-1].units:,}",
            )
        render.console.print(table_out)


def _report_table(report: IngestReport, namespace: str) -> Table:
    totals = report.totals
    table = Table(title=f"ingested {report.transcript} into {namespace!r}", title_justify="left")
    table.add_column("what")
    table.add_column("value", justify="right")
    rows = [
        ("messages in transcript", f"{report.messages:,}"),
        ("recorded / already stored", f"{report.recorded:,} / {report.skipped:,}"),
        ("units / slices in namespace", f"{report.units:,} / {report.slices:,}"),
        ("rollings", f"{totals.rollings:,}"),
        ("summariser", ", ".join(f"{k} x{v}" for k, v in totals.by_summarizer.items()) or "-"),
        (
            "LLM calls / tokens in / out",
            f"{totals.llm_calls} / {totals.prompt_tokens:,} / {totals.completion_tokens:,}",
        ),
        ("time", f"{report.seconds:.2f} s ({report.messages_per_second:,.0f} messages/s)"),
    ]
    for what, value in rows:
        table.add_row(what, value)
    return table


def _domains(values: list[str] | None) -> list[Domain]:
    if not values:
        return list(DEFAULT_DOMAINS)
    try:
        return [Domain(v.upper()) for v in values]
    except ValueError:
        known = ", ".join(d.value for d in Domain)
        raise typer.BadParameter(f"domains are {known}", param_hint="--domain") from None


@app.command()
def context(
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    domain: Annotated[
        list[str] | None,
        typer.Option(help="Domain to resolve for, primary first; repeatable.", show_default=False),
    ] = None,
    as_json: Json = False,
) -> None:
    """Print the resolved context (dialog_history of the newest slices) as XML."""
    domains = _domains(domain)
    with reported(), opened_memory(db, namespace, write=False) as memory:
        if as_json:
            render.print_json(context_document(namespace, memory.context(domains)))
        else:
            print(memory.context_xml(domains))


@app.command()
def window(
    db: Db = DEFAULT_DATABASE, namespace: Namespace = DEFAULT_NAMESPACE, as_json: Json = False
) -> None:
    """Show the conversation window: the messages not rolled yet, oldest first."""
    with reported(), opened_memory(db, namespace, write=False) as memory:
        held = memory.window()
        if as_json:
            render.print_json(window_document(namespace, held))
        else:
            render.console.print(render.window_table(held))


@app.command()
def roll(
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    idle: Annotated[
        bool, typer.Option("--idle", help="Roll all of the window and start a new session.")
    ] = False,
    through: Annotated[
        str | None, typer.Option(help="Roll only up to this message id.", show_default=False)
    ] = None,
    as_json: Json = False,
) -> None:
    """Roll the window into a slice now (rolling also happens on its own: at 72
    messages, or after an hour idle)."""
    with reported(), opened_memory(db, namespace, write=True) as memory:
        result = memory.roll_now(idle=idle, through=through)
        if as_json:
            render.print_json(rolling_document(namespace, result, idle=idle))
        elif result is None:
            render.console.print(f"nothing to roll in {namespace!r}")
        else:
            made = result.memory_slice
            render.console.print(
                f"rolled {made.end_index - made.start_index} message(s) into slice"
                f" {render.short(made.id)} of unit {render.short(result.memory_unit.id)}"
            )


@app.command()
def stats(
    db: Db = DEFAULT_DATABASE, namespace: Namespace = DEFAULT_NAMESPACE, as_json: Json = False
) -> None:
    """Totals over every rolling: messages, summarisers, LLM calls, tokens and time."""
    with reported(), opened_store(db, write=False) as store:
        info = MemoryQueries(store).namespace(namespace)
        if info is None:
            raise NotFoundError(f"namespace {namespace!r} not found")
        core = MemoryCore(store, namespace, create=False)
        if as_json:
            render.print_json(stats_document(core, info))
            return
        totals = core.rolling_stats()
        table = Table(title=f"rollings of {namespace!r}", title_justify="left")
        table.add_column("what")
        table.add_column("value", justify="right")
        table.add_row("units", f"{info.unit_count:,}")
        table.add_row("rollings", f"{totals.rollings:,}")
        table.add_row("messages rolled", f"{totals.messages:,}")
        for name, count in totals.by_summarizer.items():
            table.add_row(f"summaries by {name}", f"{count:,}")
        table.add_row("LLM calls", f"{totals.llm_calls:,}")
        table.add_row("tokens in / out", f"{totals.prompt_tokens:,} / {totals.completion_tokens:,}")
        table.add_row("LLM time", f"{totals.llm_ms / 1000:.2f} s")
        table.add_row("pipeline time (without LLM)", f"{totals.pipeline_ms / 1000:.3f} s")
        table.add_row("rollings with an LLM fallback", f"{totals.fallbacks:,}")
        for reason in totals.recent_fallbacks:
            table.add_row("  recent reason", escape(reason))
        render.console.print(table)
        if totals.consumers:
            render.console.print(render.consumers_table(totals.consumers))


@app.command()
def chat(
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    source: Annotated[str, typer.Option(help="Who is talking, as the marker shows it.")] = "USER",
) -> None:
    """Talk with the configured LLM; every reply is remembered. Reads stdin when piped."""
    with reported():
        env = Settings.from_env()
        settings = env.llm
        if settings is None:
            raise ConfigurationError(
                "chat needs an LLM: set PARTNER_MEMORY_LLM_BASE_URL and PARTNER_MEMORY_LLM_MODEL"
            )
        with opened_store(db, write=True) as store:
            memory = PartnerMemory(store, namespace, **env.runtime_options())
            client = ChatClient(settings)
            interactive = sys.stdin.isatty()
            if interactive:
                import readline  # noqa: F401 - line editing and history for input()

                render.console.print(
                    f"chat with {escape(settings.model)} - namespace {escape(namespace)!r}"
                    f" in {escape(store.url)}; /exit to leave",
                    style="dim",
                )
            try:
                while True:
                    line = _read_line(interactive)
                    if line is None or line.strip() in ("/exit", "/quit"):
                        break
                    text = line.rstrip("\n")
                    if not text.strip():
                        continue
                    system = f"{CHAT_SYSTEM}\n\n<context>\n{memory.context_xml()}\n</context>"
                    prompt = [
                        {"role": "system", "content": system},
                        *(
                            {"role": m.role, "content": m.content}
                            for m in memory.trajectory.snapshot()
                        ),
                        {"role": "user", "content": markers.user_text(source, text)},
                    ]
                    try:
                        answer = client.complete(prompt).text
                    except LLMError as exc:  # the line is kept, marked as not replied
                        memory.record_turn(text, "NO_REPLY", source=source)
                        render.warn(f"no answer from the LLM ({exc}); your message was kept")
                        continue
                    turn = memory.record_turn(text, answer, source=source)
                    if turn.replied:
                        render.console.print(
                            f"[bold green]agent>[/] {escape(answer)}" if interactive else answer,
                            markup=interactive,
                        )
                    elif interactive:
                        render.console.print("[dim](no reply)[/]")
            finally:
                client.close()
                memory.close()


def _read_line(interactive: bool) -> str | None:
    """The next line, or None at the end of input."""
    if not interactive:
        return sys.stdin.readline() or None
    try:
        return input("you> ")
    except EOFError:
        return None
