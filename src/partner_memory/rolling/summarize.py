"""R18: a summary of the increment, from the LLM, or offline when it cannot be had.

The chain tries each summariser in turn and records why it moved on; the
reference's placeholder texts are used only when every summariser failed.
The offline summariser is extractive: it keeps the sentences whose words
carry the most weight in the increment, segmenting Chinese with jieba-rs.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from partner_memory.model import Message, check_text
from partner_memory.rolling.llm import ChatClient, LLMError, UsageMeter
from partner_memory.rolling.prompts import language, summary_messages

EXCEPTION_PLACEHOLDER = "no summary, due to exception"
#: A summary is one compact paragraph: an answer far longer is not one.
MAX_SUMMARY_CHARS = 20_000
EMPTY_PLACEHOLDER = "no summary, due to empty summarize result"

_SENTENCE = re.compile(r"[^。！？!?;；\n]+(?:[。！？!?;；]+|\.(?=\s|$)|$)", re.MULTILINE)
_WORD = re.compile(r"\w", re.UNICODE)
_STOPWORDS = frozenset(
    """a an the and or but if of to in on at for with from by as is are was were be been being
    i you he she it we they me him her us them my your his its our their this that these those
    do does did have has had not no so just very really too also then than there here what when
    where who how why which would could should will can may might must shall im its it's i'm
    oh ok okay yeah yes hi hey wow thanks thank lol
    的 了 是 我 你 他 她 它 们 在 和 也 就 都 而 及 与 着 或
    一个 没有 我们 你们 他们 这 那 吗 呢 吧 啊 呀""".split()
)


class MessageSummarizer(Protocol):
    """Turns an increment into one paragraph; raises (or returns blank) when it cannot."""

    name: str

    def summarize(self, messages: Sequence[Message], meter: UsageMeter) -> str: ...


@dataclass(frozen=True, slots=True)
class Summary:
    text: str
    summarizer: str


class LLMSummarizer:
    """One chat completion over the structured task of R18."""

    name = "llm"

    def __init__(self, client: ChatClient, *, max_tokens: int = 400) -> None:
        self._client = client
        self._max_tokens = max_tokens

    def summarize(self, messages: Sequence[Message], meter: UsageMeter) -> str:
        return self._client.complete(
            summary_messages(messages),
            meter=meter,
            what="summarize",
            max_tokens=self._max_tokens,
            max_chars=MAX_SUMMARY_CHARS,
        ).text


#: What a speaker is called when a message names nobody: roles and the default marker.
_UNNAMED = frozenset({"user", "assistant", "system", "agent"})


def _speaker(message: Message, lang: str) -> tuple[str, str]:
    """Who said it, as the agent's own summary calls them, and what they are: "self"
    (the agent), "unnamed" (a user the message names not) or "name"."""
    named = message.speaker
    if named == "AGENT" or (named is None and message.role == "assistant"):
        return ("我" if lang == "zh" else "I"), "self"
    if named is None or named.lower() in _UNNAMED:
        return ("用户" if lang == "zh" else "the user"), "unnamed"
    return named, "name"


def _tokens(text: str) -> tuple[str, ...]:
    """A sentence's content words. Consecutive rollings summarise overlapping windows,
    so most sentences come again (about twice each): those of ordinary length are
    segmented once and kept (at most 65,536 of them, so at most ~65 MB of text)."""
    return _segmented(text) if len(text) <= _CACHED_CHARS else _segment(text)


_CACHED_CHARS = 1000


def _segment(text: str) -> tuple[str, ...]:
    # imported on first use: loading the segmenter's dictionary takes ~90 ms, which
    # commands that only read memory should not pay at start-up
    import rjieba

    kept = (_content_word(t) for t in rjieba.cut(text))
    return tuple(t for t in kept if t is not None)


@functools.lru_cache(maxsize=1 << 16)
def _content_word(token: str) -> str | None:
    """A segment as a content word (lower-cased), or None for a stop word, number or
    punctuation. Words recur across messages: each is judged once."""
    lowered = token.lower()
    if _WORD.search(token) and lowered not in _STOPWORDS and not token.isdigit():
        return lowered
    return None


_segmented = functools.lru_cache(maxsize=1 << 16)(_segment)


class ExtractiveSummarizer:
    """Offline summary: the most informative sentences, in order, with who said them."""

    name = "extractive"

    def __init__(self, max_chars: int = 420) -> None:
        self.max_chars = max_chars

    def summarize(self, messages: Sequence[Message], meter: UsageMeter) -> str:
        lang = language([m.content for m in messages])
        sentences: list[tuple[int, str, str, tuple[str, ...], frozenset[str]]] = []
        speakers: list[str] = []  # the participants, each once, by name
        named = False
        for message in messages:
            speaker, kind = _speaker(message, lang)
            named = named or kind == "name"
            if speaker not in speakers and kind != "self":
                speakers.append(speaker)
            for match in _SENTENCE.finditer(message.text):
                sentence = match.group().strip()
                words = _tokens(sentence)
                if words:
                    sentences.append((len(sentences), speaker, sentence, words, frozenset(words)))
        if not sentences:
            return ""
        frequency = Counter(w for *_, unique in sentences for w in unique)
        top = max(frequency.values())

        def score(item: tuple[int, str, str, tuple[str, ...], frozenset[str]]) -> float:
            weight = sum(frequency[w] for w in item[4]) / top / math.sqrt(len(item[3]) + 1)
            return weight * min(1.0, len(item[3]) / 4)  # "Ha, ha!" says little

        budget = self.max_chars
        chosen: list[tuple[int, str, str, tuple[str, ...], frozenset[str]]] = []
        for item in sorted(sentences, key=score, reverse=True):
            cost = len(item[2]) + len(item[1]) + 2
            if cost <= budget or not chosen:
                chosen.append(item)
                budget -= cost
        chosen.sort(key=lambda item: item[0])
        # a speaker's consecutive sentences go under one name
        said: list[tuple[str, list[str]]] = []
        for _, speaker, text, *_ in chosen:
            if said and said[-1][0] == speaker:
                said[-1][1].append(text)
            else:
                said.append((speaker, [text]))
        if lang == "zh":
            head = f"我和{'、'.join(speakers)}的对话：" if named else "我的记录："
            parts = ("；".join(t.rstrip("。；;") for t in texts) for _, texts in said)
            return (
                head + "；".join(f"{s}：{p}" for (s, _), p in zip(said, parts, strict=True)) + "。"
            )
        head = f"I talked with {_and(speakers)}: " if named else "My notes: "
        return head + " ".join(f"{s}: {' '.join(texts)}" for s, texts in said)


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


class SummarizerChain:
    """Tries summarisers in order; each failure is recorded on the meter as a fallback."""

    def __init__(self, summarizers: Sequence[MessageSummarizer]) -> None:
        self._summarizers = list(summarizers)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self._summarizers]

    def summarize(self, messages: Sequence[Message], meter: UsageMeter) -> Summary:
        placeholder = EMPTY_PLACEHOLDER
        for summarizer in self._summarizers:
            try:
                text = check_text(summarizer.summarize(messages, meter), "summary").strip()
            except (LLMError, Exception) as exc:  # a summariser must never stop rolling
                if not isinstance(exc, LLMError):
                    meter.fallbacks.append(f"{summarizer.name}: {type(exc).__name__}: {exc}")
                placeholder = EXCEPTION_PLACEHOLDER
                continue
            if text:
                return Summary(text, summarizer.name)
            meter.fallbacks.append(f"{summarizer.name}: empty summary")
            placeholder = EMPTY_PLACEHOLDER
        return Summary(placeholder, "placeholder")
