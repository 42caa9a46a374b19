"""Prompts for compression (R17) and summarisation (R18), in Chinese and English.

The language follows the conversation: mostly CJK text gets the Chinese
prompt. Both keep the reference's intent: the summary is one compact
paragraph in the agent's own first-person voice.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape

from partner_memory.ascii_text import letters as ascii_letters
from partner_memory.model import Message

TAG_NOTES = {
    "en": (
        "Tag notes: a message starts with a marker line. [[AGENT]: self] is you, the agent;"
        " [SOURCE] names who spoke to you. [NOT_REPLIED] marks what you thought but did not"
        " say to the user. [COMPRESSED] marks a message shortened before this task."
    ),
    "zh": (
        "标记说明：每条消息以标记行开头。[[AGENT]: self] 是你自己（智能体）；"
        "[来源] 表示对你说话的人。"
        "[NOT_REPLIED] 表示你想到但没有回复给用户的内容；[COMPRESSED] 表示该消息在此之前已被压缩。"
    ),
}

SUMMARY_SYSTEM = {
    "en": (
        "You keep the long-term memory of an agent. Summarise the conversation below in ONE"
        " compact paragraph, written by the agent in the first person ('I'). Keep facts,"
        " names, dates, decisions, constraints, promises, open questions and the mood."
        " No headings, no lists, no preamble."
    ),
    "zh": (
        "你负责维护一个智能体的长期记忆。请用第一人称（“我”）把下面的对话总结成一段紧凑的文字。"
        "保留事实、人名、日期、决定、约束、承诺、未解决的问题和情绪。不要标题、不要列表、不要开场白。"
    ),
}

COMPRESS_SYSTEM = {
    "en": (
        "Shorten the message below to well under {limit} characters. Keep every fact, number,"
        " name, decision and question; drop repetition and filler. Answer with the shortened"
        " text only."
    ),
    "zh": (
        "把下面的消息压缩到远少于 {limit} 个字符。保留所有事实、数字、人名、决定和问题，去掉重复和"
        "冗余。只回答压缩后的文本。"
    ),
}


def language(texts: Sequence[str]) -> str:
    """'zh' when most letters are CJK, else 'en'."""
    counts = [letter_counts(text) for text in texts]
    return language_of(sum(c[0] for c in counts), sum(c[1] for c in counts))


def language_of(cjk: int, letters: int) -> str:
    """'zh' when most of `letters` are CJK characters (`cjk` of them), else 'en'."""
    return "zh" if letters and cjk * 2 >= letters else "en"


def letter_counts(text: str) -> tuple[int, int]:
    """(CJK characters, letters) of `text`, CJK counted among the letters."""
    if text.isascii():  # no CJK, and its letters counted in C, not char by char
        return 0, ascii_letters(text)
    cjk = letters = 0
    for ch in text:
        if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf":
            cjk += 1
            letters += 1
        elif ch.isalpha():
            letters += 1
    return cjk, letters


def summary_messages(increment: Sequence[Message]) -> list[dict[str, str]]:
    """R18: a structured task - tag notes, then the messages with their roles."""
    lang = language([m.content for m in increment])
    body = "\n".join(f'<message role="{m.role}">{escape(m.content)}</message>' for m in increment)
    notes = escape(TAG_NOTES[lang])
    task = f"<task>\n<notes>{notes}</notes>\n<messages>\n{body}\n</messages>\n</task>"
    return [{"role": "system", "content": SUMMARY_SYSTEM[lang]}, {"role": "user", "content": task}]


def compress_messages(body: str, limit: int) -> list[dict[str, str]]:
    lang = language([body])
    return [
        {"role": "system", "content": COMPRESS_SYSTEM[lang].format(limit=limit)},
        {"role": "user", "content": body},
    ]
