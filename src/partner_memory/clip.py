"""Text cut to a bound, marked with an ellipsis: how long texts are shown where space is
bounded (recent messages in MCP's context, recalled messages in an adapter's prompt,
a consumer's error)."""

from __future__ import annotations


def clipped(text: str, most: int) -> str:
    """`text`, or its first `most - 1` characters and "…" (`most` characters in all)."""
    return text if len(text) <= most else text[: most - 1] + "…"
