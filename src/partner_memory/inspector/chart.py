"""A small bar chart of rollings and tokens per day, as inline SVG (no script needed)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from partner_memory.model import RollingRecord

WIDTH, HEIGHT = 600, 120


@dataclass(frozen=True, slots=True)
class Bar:
    day: str
    x: float
    width: float
    rollings: int
    tokens: int
    rolling_height: float
    token_height: float


def daily_bars(history: Sequence[RollingRecord]) -> list[Bar]:
    """One bar pair per day that had rollings, oldest first, scaled to the chart."""
    rollings: Counter[str] = Counter()
    tokens: Counter[str] = Counter()
    for record in history:
        day = datetime.fromtimestamp(record.started_at / 1000, UTC).strftime("%Y-%m-%d")
        rollings[day] += 1
        tokens[day] += record.cost.prompt_tokens + record.cost.completion_tokens
    days = sorted(rollings)
    if not days:
        return []
    step = WIDTH / len(days)
    most_rollings, most_tokens = max(rollings.values()), max(tokens.values()) or 1
    return [
        Bar(
            day=day,
            x=i * step,
            width=max(1.0, step * 0.45),
            rollings=rollings[day],
            tokens=tokens[day],
            rolling_height=HEIGHT * rollings[day] / most_rollings,
            token_height=HEIGHT * tokens[day] / most_tokens,
        )
        for i, day in enumerate(days)
    ]
