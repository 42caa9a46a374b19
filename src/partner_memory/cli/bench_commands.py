"""`partner-memory bench ...`: measurements to run against your own install and data."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from partner_memory.bench.locomo import CATEGORIES, KS, run_locomo
from partner_memory.cli import render
from partner_memory.cli.app import Json, app, opened_store
from partner_memory.cli.errors import reported
from partner_memory.recall.embed import EmbeddingSettings

bench = typer.Typer(help="Measure recall on your own install.", no_args_is_help=True)
app.add_typer(bench, name="bench")


@bench.command("locomo")
def locomo(
    directory: Annotated[
        Path, typer.Argument(help="A folder of LoCoMo-format conversations (*.json).")
    ],
    db: Annotated[
        str | None,
        typer.Option(help="Database to ingest into (default: a temporary SQLite file)."),
    ] = None,
    as_json: Json = False,
) -> None:
    """Ingest each conversation into its own namespace, then score evidence recall@5/10/25
    per question category, beside the same recall by words only and plain BM25 over
    single turns (PARTNER_MEMORY_EMBEDDINGS* choose the embedder)."""
    with reported(), tempfile.TemporaryDirectory() as scratch:
        database = db or str(Path(scratch) / "locomo.db")
        with opened_store(database, write=True) as store:
            report = run_locomo(
                store,
                directory,
                progress=None if as_json else render.warn_progress,
                embeddings=EmbeddingSettings.from_env(),
            )
        if as_json:
            render.print_json(report.to_dict())
            return
        table = Table(
            title=f"evidence recall: {report.conversations} conversations,"
            f" {report.questions:,} questions",
            title_justify="left",
        )
        table.add_column("system")
        table.add_column("k", justify="right")
        for name in [*CATEGORIES.values(), "all"]:
            table.add_column(name.split("-")[0], justify="right")  # multi, temporal, ...
        table.add_column("ms p50/p99", justify="right")
        for system in report.systems:
            for k in KS:
                row = system.recall_at[str(k)]
                cells = [f"{100 * row.get(c, 0.0):.1f}" for c in [*CATEGORIES.values(), "all"]]
                timing = f"{system.p50_ms:.1f}/{system.p99_ms:.1f}" if k == KS[0] else ""
                table.add_row(system.name if k == KS[0] else "", str(k), *cells, timing)
        render.console.print(table)
