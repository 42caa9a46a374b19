"""Commands over recall: search a namespace's memory, rebuild its index."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from partner_memory import markers
from partner_memory.cli import render
from partner_memory.cli.app import Db, Json, Namespace, app, epoch_ms, opened_memory
from partner_memory.cli.errors import reported
from partner_memory.documents import recall_document, topics_document
from partner_memory.errors import InvalidInputError
from partner_memory.recall.query import MAX_K, RecallQuery
from partner_memory.recall.results import RecallResult
from partner_memory.settings import DEFAULT_DATABASE, DEFAULT_NAMESPACE


@app.command()
def recall(
    query: Annotated[str, typer.Argument(help="What to look for, in words.")],
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    k: Annotated[int, typer.Option("-k", help=f"How many messages (1-{MAX_K}).")] = 10,
    since: Annotated[str | None, typer.Option(help="Said at or after (ISO, or epoch ms).")] = None,
    until: Annotated[str | None, typer.Option(help="Said before (ISO, or epoch ms).")] = None,
    dates: Annotated[
        bool, typer.Option(help="Read a date in QUERY (yesterday, May 2023) as a time range.")
    ] = True,
    topic: Annotated[
        str | None, typer.Option(help="Keep to a topic path and below (travel->japan).")
    ] = None,
    role: Annotated[
        str | None, typer.Option(help="Keep to messages of this role (user, assistant, system).")
    ] = None,
    speaker: Annotated[
        str | None, typer.Option(help="Keep to what this participant said (any case).")
    ] = None,
    unit: Annotated[str | None, typer.Option(help="Keep to this unit's messages.")] = None,
    metadata: Annotated[
        list[str] | None,
        typer.Option(
            "--metadata",
            metavar="KEY=VALUE",
            help="Keep to messages whose metadata has KEY equal to VALUE (read as JSON if"
            " it is, else as text); repeat for several.",
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Find the messages that best match QUERY, and the slices that hold them."""
    with reported():
        bounds = epoch_ms(since, "--since"), epoch_ms(until, "--until")
        asked = RecallQuery.from_dict(
            {"query": query, "k": k, "since": bounds[0], "until": bounds[1], "dates": dates}
            | {"topic": topic, "role": role, "speaker": speaker, "unit": unit}
            | {"metadata": _metadata_pairs(metadata or [])}
        )
        with opened_memory(db, namespace, write=False) as memory:
            found = memory.recall(asked)
        if as_json:
            render.print_json(recall_document(namespace, found))
            return
        render.console.print(_hits_table(found))
        if found.slices:
            render.console.print(render.slices_table([s.slice for s in found.slices]))


def _metadata_pairs(given: list[str]) -> dict[str, Any]:
    """`--metadata KEY=VALUE` flags as a dict: VALUE as JSON when it parses (2, true,
    "2"), else as the text it is."""
    pairs: dict[str, Any] = {}
    for flag in given:
        key, sep, text = flag.partition("=")
        if not sep or not key:
            raise InvalidInputError(f"--metadata takes KEY=VALUE, got {flag!r}")
        try:
            pairs[key] = json.loads(text)
        except ValueError:
            pairs[key] = text
    return pairs


def _hits_table(found: RecallResult) -> Table:
    title = f"recall {found.query!r}"
    if found.date_range is not None:
        span = found.date_range
        named = f"{span.cue!r}: " if span.cue else ""
        title += f" ({named}{render.when(span.start_at)} - {render.when(span.end_at)})"
    if found.topic is not None:
        title += f" in topic {found.topic.path}"
        if found.topic.related:
            title += f" (related: {', '.join(found.topic.related)})"
    table = Table(title=escape(title), title_justify="left")
    table.add_column("score", justify="right")
    table.add_column("where", no_wrap=True)
    table.add_column("when (UTC)", no_wrap=True)
    table.add_column("message", overflow="fold", ratio=1)
    for hit in found.hits:
        where = "window" if hit.unit_id is None else f"{render.short(hit.unit_id)}#{hit.position}"
        marker, body = markers.split(hit.message.content)
        text = f"{marker}: {body}" if marker else body
        table.add_row(f"{hit.score:.2f}", where, render.when(hit.message.timestamp), escape(text))
    return table


@app.command()
def topics(
    db: Db = DEFAULT_DATABASE,
    namespace: Namespace = DEFAULT_NAMESPACE,
    limit: Annotated[int, typer.Option(help="How many topics, most used first.")] = 100,
    as_json: Json = False,
) -> None:
    """The topic paths the LLM filed a namespace's slices under (none without an LLM)."""
    with reported(), opened_memory(db, namespace, write=False) as memory:
        found = memory.topics(limit=limit)
        if as_json:
            render.print_json(topics_document(namespace, found))
            return
        table = Table(title=f"topics of {namespace!r}", title_justify="left")
        table.add_column("topic", overflow="fold")
        table.add_column("slices", justify="right")
        for counted in found:
            table.add_row(escape(counted.path), str(counted.slice_count))
        render.console.print(table)


@app.command()
def reindex(
    db: Db = DEFAULT_DATABASE, namespace: Namespace = DEFAULT_NAMESPACE, as_json: Json = False
) -> None:
    """Rebuild a namespace's recall index from its units (the units are the truth)."""
    with reported(), opened_memory(db, namespace, write=True) as memory:
        count = memory.service.reindex(namespace)
        if as_json:
            render.print_json({"namespace": namespace, "message_count": count})
            return
        render.console.print(f"reindexed {namespace!r}: {count:,} messages")
