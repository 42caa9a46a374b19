"""Topic paths of slices ("project->partner->memory"), drawn by the LLM, for recall.

As in the Partner runtime's retrieval layer, each slice is filed under one
to three paths from general to specific; recall can then keep to a topic,
the topics below it, or - when nothing is filed there - its parent, and
names the topics that share slices with it. A durable consumer of the
rolling log asks the LLM for a slice's paths before its transaction (no
lock is held while it waits; it sees the summary and the messages) and
writes them with its position, so every
rolling is filed once, even across crashes. The namespace's most used paths
go into the prompt, so the LLM files new slices under existing topics.
Without an LLM there are no topics: the consumer is not registered.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from partner_memory.model import TOPIC_SEPARATOR, LogEntry
from partner_memory.rolling.consumers import PreparedWork
from partner_memory.rolling.llm import ChatClient
from partner_memory.rolling.prompts import language
from partner_memory.store.contract.capabilities import TopicStore
from partner_memory.store.contract.staged import FiledTopics, Staged

#: The consumer's name in the `consumers` table.
TOPICS_CONSUMER = "topics"
#: Paths kept per slice, levels per path, characters per level.
MAX_PATHS, MAX_LEVELS, MAX_LEVEL_CHARS = 3, 4, 40
#: Existing paths shown to the LLM so it reuses them.
KNOWN_PATHS = 40
#: Characters of the slice's messages given beside its summary.
MAX_TEXT_CHARS = 4000

TOPIC_SYSTEM = {
    "en": (
        "You file an agent's memories by topic. Answer with 1 to 3 topic paths for the"
        " conversation below, one per line, each from general to specific with 2 to 4"
        " short lower-case levels joined by '->', for example: project->partner->memory."
        " Reuse a known topic when it fits. Answer with the paths only."
    ),
    "zh": (
        "你负责按主题归档智能体的记忆。请为下面的对话给出 1 到 3 条主题路径，每行一条，"
        "从一般到具体，2 到 4 级，用 '->' 连接，例如：项目->partner->记忆。"
        "已有主题合适时请沿用。只回答路径。"
    ),
}


def normalize_path(text: str) -> str | None:
    """A path as stored: levels trimmed, lower-cased, spaces single; None if unusable."""
    levels = [re.sub(r"\s+", " ", level).strip(" \t\"'`*.-:") for level in text.split("->")]
    levels = [level.lower() for level in levels if level]
    if not levels or any(len(level) > MAX_LEVEL_CHARS for level in levels):
        return None
    return TOPIC_SEPARATOR.join(levels[:MAX_LEVELS])


def parse_paths(answer: str) -> list[str]:
    """The paths in an LLM's answer, at most three: lines with levels joined by '->' (list
    markers and numbering ignored; prose around them is not a topic)."""
    found: list[str] = []
    for line in answer.splitlines():
        if TOPIC_SEPARATOR not in line:
            continue
        path = normalize_path(re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line))
        if path and path not in found:
            found.append(path)
    return found[:MAX_PATHS]


class TopicExtractor:
    """`PreparingConsumer` filing each rolling's slice under topic paths."""

    name = TOPICS_CONSUMER

    def __init__(self, client: ChatClient, store: TopicStore) -> None:
        self._client = client
        self._store = store
        self._work = PreparedWork(self._paths)

    def prepare(self, entries: Sequence[LogEntry]) -> None:
        self._work.prepare(entries)

    def apply(self, entry: LogEntry) -> Sequence[Staged]:
        paths = self._work.take(entry)
        return [FiledTopics(paths)] if paths else []

    def _paths(self, entry: LogEntry) -> list[str]:
        said = "\n".join(m.content for m in entry.messages if m.content)[:MAX_TEXT_CHARS]
        if not said.strip():  # everything in it was forgotten
            return []
        text = f"{entry.slice.summary.strip()}\n\n{said}".strip()
        lang = language([text])
        known = [p for p, _ in self._store.topic_paths(entry.namespace, limit=KNOWN_PATHS)]
        prompt = text
        if known:
            prompt = ("已有主题：" if lang == "zh" else "Known topics: ") + "; ".join(known)
            prompt += "\n\n" + text
        asked = [
            {"role": "system", "content": TOPIC_SYSTEM[lang]},
            {"role": "user", "content": prompt},
        ]
        answer = self._client.complete(
            asked,
            what="topics",
            max_tokens=120,
        ).text
        return parse_paths(answer)
