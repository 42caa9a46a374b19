"""`partner-memory bench ...`: measurements to run against your own install and data."""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from partner_memory.bench.beam import run_beam
from partner_memory.bench.locomo import CATEGORIES, run_locomo
from partner_memory.bench.scores import KS, EvidenceReport
from partner_memory.cli import render
from partner_memory.cli.app import Json, app, opened_store
from partner_memory.cli.errors import reported
from partner_memory.recall.embed import EmbeddingSettings
from partner_memory.store.contract.base import MemoryStore

bench = typer.Typer(help="Measure recall on your own install.", no_args_is_help=True)
app.add_typer(bench, name="bench")

Database = Annotated[
    str | None,
    typer.Option(help="Database to ingest into (default: a temporary SQLite file)."),
]
Folds = Annotated[
    bool,
    typer.Option(
        "--folds",
        help="Also print each conversation's R@10 (each a fold) and paired 95 % intervals.",
    ),
]
Runner = Callable[..., EvidenceReport]


@bench.command("locomo")
def locomo(
    directory: Annotated[
        Path, typer.Argument(help="A folder of LoCoMo-format conversations (*.json).")
    ],
    db: Database = None,
    folds: Folds = False,
    fusion_grid: Annotated[
        str | None,
        typer.Option(
            help="Weights of the order by meaning to try (e.g. 0,0.5,1,2): each is chosen"
            " on four conversations and scored on the fifth, for each (with --folds).",
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Ingest each conversation into its own namespace, then score evidence recall@5/10/25
    per question category, beside the same recall by words only and plain BM25 over
    single turns (PARTNER_MEMORY_EMBEDDINGS* choose the embedder)."""
    grid = _grid(fusion_grid)
    runner = functools.partial(run_locomo, fusion_grid=grid)
    _run(runner, directory, db, "locomo", list(CATEGORIES.values()), folds, as_json)


def _grid(text: str | None) -> list[float]:
    """`--fusion-grid`'s values, or a `typer.BadParameter` naming what is wrong."""
    if not text:
        return []
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise typer.BadParameter(f"not numbers separated by commas: {text!r}") from None
    if not values or any(not (0 <= v < float("inf")) for v in values):
        raise typer.BadParameter(f"weights must be numbers >= 0: {text!r}")
    return values


@bench.command("beam")
def beam(
    directory: Annotated[
        Path, typer.Argument(help="A folder of BEAM conversations (N/chat.json and questions).")
    ],
    db: Database = None,
    folds: Folds = False,
    as_json: Json = False,
) -> None:
    """Ingest each BEAM conversation into its own namespace (each batch a session at its
    time anchor), then score evidence recall@5/10/25 per memory ability, beside plain
    BM25 over single messages (PARTNER_MEMORY_EMBEDDINGS* choose the embedder)."""
    _run(run_beam, directory, db, "beam", None, folds, as_json)


def _run(
    runner: Runner,
    directory: Path,
    db: str | None,
    name: str,
    columns: Sequence[str] | None,
    folds: bool,
    as_json: bool,
) -> None:
    with reported(), tempfile.TemporaryDirectory() as scratch:
        database = db or str(Path(scratch) / f"{name}.db")
        store: AbstractContextManager[MemoryStore] = opened_store(database, write=True)
        with store as opened:
            report = runner(
                opened,
                directory,
                progress=None if as_json else render.warn_progress,
                embeddings=EmbeddingSettings.from_env(),
            )
        if as_json:
            render.print_json(report.to_dict())
            return
        render.console.print(_scores(report, columns))
        if folds:
            render.console.print(_folds(report))
            render.console.print(_paired(report))
            if report.folds:
                render.console.print(_chosen(report))


def _scores(report: EvidenceReport, columns: Sequence[str] | None) -> Table:
    if columns is None:  # every category the questions have, in order
        columns = sorted({c for c in report.systems[0].recall_at[str(KS[0])] if c != "all"})
    table = Table(
        title=f"evidence recall: {report.conversations} conversations,"
        f" {report.questions:,} questions",
        title_justify="left",
    )
    table.add_column("system")
    table.add_column("k", justify="right")
    for column in [*columns, "all"]:
        table.add_column(column.split("-")[0][:12], justify="right")  # multi, temporal, ...
    table.add_column("ms p50/p99", justify="right")
    for system in report.systems:
        for k in KS:
            row = system.recall_at[str(k)]
            cells = [f"{100 * row.get(c, 0.0):.1f}" for c in [*columns, "all"]]
            timing = f"{system.p50_ms:.1f}/{system.p99_ms:.1f}" if k == KS[0] else ""
            table.add_row(system.name if k == KS[0] else "", str(k), *cells, timing)
    return table


def _folds(report: EvidenceReport) -> Table:
    table = Table(title="R@10 per conversation (fold)", title_justify="left")
    table.add_column("conversation")
    for system in report.systems:
        table.add_column(system.name, justify="right")
    for conversation in report.systems[0].by_conversation:
        cells = [f"{100 * s.by_conversation.get(conversation, 0.0):.1f}" for s in report.systems]
        table.add_row(conversation, *cells)
    return table


def _paired(report: EvidenceReport) -> Table:
    table = Table(title="paired R@10 difference, 95 % interval", title_justify="left")
    table.add_column("systems")
    table.add_column("conversation")
    table.add_column("mean", justify="right")
    table.add_column("interval", justify="right")
    for row in report.paired:
        table.add_row(
            f"{row.first} - {row.second}",
            row.conversation,
            f"{100 * row.mean:+.1f}",
            f"[{100 * row.low:+.1f}, {100 * row.high:+.1f}]",
        )
    return table


def _chosen(report: EvidenceReport) -> Table:
    table = Table(
        title="fusion weight chosen on the other conversations, R@10 held out",
        title_justify="left",
    )
    table.add_column("held out")
    table.add_column("chosen", justify="right")
    table.add_column("R@10 held out", justify="right")
    table.add_column("R@10 of each weight on the others", justify="left")
    for fold in report.folds:
        tried = ", ".join(f"{w}: {100 * v:.1f}" for w, v in fold.tuned.items())
        table.add_row(fold.conversation, f"{fold.chosen:g}", f"{100 * fold.held_out:.1f}", tried)
    mean = sum(f.held_out for f in report.folds) / len(report.folds)
    table.add_row("mean", "", f"{100 * mean:.1f}", "")
    return table
