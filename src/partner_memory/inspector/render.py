"""Templates and the filters they use: times, highlighted words, metadata."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")


def when(ms: int | None) -> Markup:
    """A time in UTC for readers without JavaScript; the script rewrites it in their zone."""
    if ms is None:
        return Markup("<span class=muted>-</span>")
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return Markup('<time datetime="{}">{}</time>').format(
        moment.isoformat(timespec="seconds").replace("+00:00", "Z"),
        moment.strftime("%Y-%m-%d %H:%M UTC"),
    )


def words_of(query: str) -> list[str]:
    return [w for w in re.findall(r"\w+", query.lower()) if len(w) > 2]


def highlight(text: str, words: list[str]) -> Markup:
    """`text` escaped, with each word of the query (and its longer forms) marked."""
    if not words:
        return escape(text)
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\w*", re.IGNORECASE)
    parts, last = [], 0
    for found in pattern.finditer(text):
        parts += [escape(text[last : found.start()]), Markup("<mark>{}</mark>").format(found[0])]
        last = found.end()
    parts.append(escape(text[last:]))
    return Markup("").join(parts)


def pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)


templates.env.filters.update(when=when, pretty=pretty)
templates.env.globals.update(highlight=highlight)
