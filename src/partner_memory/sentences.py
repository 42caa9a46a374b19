"""Sentences as the offline summariser cuts them, and as a summary is checked against its
messages (`provenance`): Latin and CJK end marks, semicolons and lines."""

from __future__ import annotations

import re

SENTENCE = re.compile(r"[^。！？!?;；\n]+(?:[。！？!?;；]+|\.(?=\s|$)|$)", re.MULTILINE)


def sentences_of(text: str) -> list[str]:
    """`text`'s sentences, stripped, the empty ones left out."""
    return [s for s in map(str.strip, SENTENCE.findall(text)) if s]
