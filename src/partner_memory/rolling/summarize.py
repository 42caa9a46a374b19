"""R18: a summary of the increment, from the LLM, or offline when it cannot be had.

The chain tries each summariser in turn and records why it moved on; the
reference's placeholder texts are used only when every summariser failed.
The offline summariser is extractive: it keeps the sentences whose words
carry the most weight in the increment, segmenting Chinese with jieba-rs.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain, filterfalse
from typing import NamedTuple, Protocol

from partner_memory import markers as r11
from partner_memory.ascii_text import lower_alnum_runs
from partner_memory.model import Message, check_text
from partner_memory.rolling.llm import ChatClient, LLMError, UsageMeter
from partner_memory.rolling.prompts import language_of, letter_counts, summary_messages
from partner_memory.said_dates import pointed_dates
from partner_memory.sentences import SENTENCE

EXCEPTION_PLACEHOLDER = "no summary, due to exception"
#: A summary is one compact paragraph: an answer far longer is not one.
MAX_SUMMARY_CHARS = 20_000
EMPTY_PLACEHOLDER = "no summary, due to empty summarize result"

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


def _speaker(message: Message, identity: str | None, lang: str) -> tuple[str, str]:
    """Who said it, as the agent's own summary calls them, and what they are: "self"
    (the agent), "unnamed" (a user the message names not) or "name"."""
    named = message.speaker_named(identity)
    if named == "AGENT" or (named is None and message.role == "assistant"):
        return ("我" if lang == "zh" else "I"), "self"
    if named is None or named.lower() in _UNNAMED:
        return ("用户" if lang == "zh" else "the user"), "unnamed"
    return named, "name"


class _Sentence(NamedTuple):
    """A sentence as the summariser weighs it: its distinct words, and what its length
    does to its weight (n words: divided by sqrt(n + 1), times min(1, n / 4))."""

    text: str
    unique: frozenset[str]
    root: float  # sqrt(n + 1)
    short: float  # min(1, n / 4): "Ha, ha!" says little


class _Read(NamedTuple):
    """One message's content as the summariser reads it."""

    identity: str | None  # the R11 marker's identity, None without one
    sentences: tuple[_Sentence, ...]  # those with content words only
    cjk: int  # its CJK characters and letters, which decide the summary's language
    letters: int


def _read(content: str) -> _Read:
    """A message read once: marker, sentences and their words, letters. Conversations
    say the same things again (greetings, thanks, repeated turns): contents of up to
    1,000 characters are read once and kept (at most 65,536 of them, ~65 MB of text)."""
    return _read_kept(content) if len(content) <= _CACHED_CHARS else _read_now(content)


_CACHED_CHARS = 1000


def _read_now(content: str) -> _Read:
    parsed = r11.parse(content)
    sentences = []
    for text in map(str.strip, SENTENCE.findall(parsed.body)):
        words = _segment(text)
        if words:
            n = len(words)
            sentences.append(_Sentence(text, frozenset(words), math.sqrt(n + 1), min(1.0, n / 4)))
    cjk, letters = letter_counts(content)
    return _Read(parsed.identity, tuple(sentences), cjk, letters)


_read_kept = functools.lru_cache(maxsize=1 << 16)(_read_now)


def _segment(text: str) -> tuple[str, ...]:
    """A sentence's content words.

    jieba cuts each run of `[A-Za-z0-9+#&._%-]` on its own; a run of letters and
    digits, with or without dots after it, it cuts into that run and the dots. So
    an ASCII sentence without `+#&_%-` and without a dot before a letter or digit
    has the runs of letters and digits for words, found in C without segmenting it
    (94 % of LoCoMo's sentences; the same words as jieba's on every one of them and on
    random text, `tests/test_text_cutting.py`)."""
    if _cut_at_runs(text):
        # lower-cased, all of them words (`_content_word` in C): the stop words and numbers out
        return tuple(
            filterfalse(str.isdigit, filterfalse(_STOPWORDS.__contains__, lower_alnum_runs(text)))
        )
    return _jieba_words(text)


def load_segmenter() -> None:
    """Load jieba's dictionary now (~0.1 s) rather than in the first summary of a text
    that is not plain ASCII."""
    _jieba_words("预热")


def _jieba_words(text: str) -> tuple[str, ...]:
    """`text`'s content words as jieba segments it."""
    # imported on first use: loading the segmenter's dictionary takes ~90 ms, which
    # commands that only read memory should not pay at start-up
    import rjieba

    return tuple(filter(None, map(_content_word, rjieba.cut(text))))


#: What makes jieba cut an ASCII sentence otherwise than into runs of letters and digits.
_JIEBA_CUTS = re.compile(r"[+#&_%\-]|\.[A-Za-z0-9]")
_DOT_BEFORE_RUN = re.compile(r"\.[A-Za-z0-9]")


def _cut_at_runs(text: str) -> bool:
    """Whether jieba cuts `text` into its runs of letters and digits: ASCII, and no match
    of `_JIEBA_CUTS` - found by six searches for one character each (C's memchr), a third
    of the time the pattern takes to scan a sentence."""
    return text.isascii() and not (
        "-" in text
        or "+" in text
        or "#" in text
        or "&" in text
        or "_" in text
        or "%" in text
        or ("." in text and _DOT_BEFORE_RUN.search(text) is not None)
    )


@functools.lru_cache(maxsize=1 << 16)
def _content_word(token: str) -> str | None:
    """A segment as a content word (lower-cased), or None for a stop word, number or
    punctuation (never ""). Words recur across messages: each is judged once."""
    lowered = token.lower()
    if _WORD.search(token) and lowered not in _STOPWORDS and not token.isdigit():
        return lowered
    return None


#: Characters of summary per message summarised, between `max_chars` and `MOST_CHARS`: a
#: long increment says more than a short one (one short clause a message).
CHARS_PER_MESSAGE, MOST_CHARS = 30, 1500
#: A sentence's weight times (1 + FACT_WEIGHT x its facts): names, numbers and dates are
#: what a summary read months later needs ("I moved to Lisbon in 2022", not "Wow!").
FACT_WEIGHT = 1.0
#: A question's weight times this: it asks, it rarely tells.
QUESTION_WEIGHT = 0.3
#: A word already said by a chosen sentence counts this much in the next ones.
REPEATED = 0.3
_CAPITALISED = re.compile(r"(?<=[\w,;:] )[A-Z][a-z]+|\d")


class ExtractiveSummarizer:
    """Offline summary: the most informative sentences, in order, with who said them.

    A sentence weighs what its words weigh in the increment (how often the increment
    says them, over its length), times what it tells: its facts (names, numbers, the
    dates it points to) raise it, a question lowers it, and words an earlier choice
    already said count less (so the summary does not say one thing twice). The length
    follows the increment (`CHARS_PER_MESSAGE`, from `max_chars` up to `MOST_CHARS`),
    and a relative date is said as the date it meant ("yesterday" -> "(7 May 2023)"):
    the summary is read long after its "now".

    `elsewhere`, if given, may make the same summary in another process (a service
    hands it to its analysis worker, off the writers' GIL); None from it: made here."""

    name = "extractive"

    def __init__(
        self,
        max_chars: int = 420,
        *,
        elsewhere: Callable[[Sequence[Message], int], str | None] | None = None,
    ) -> None:
        self.max_chars = max_chars
        self._elsewhere = elsewhere

    def summarize(self, messages: Sequence[Message], meter: UsageMeter) -> str:
        if self._elsewhere is not None:
            made = self._elsewhere(messages, self.max_chars)
            if made is not None:
                return made
        return self.summarize_here(messages)

    def summarize_here(self, messages: Sequence[Message]) -> str:
        reads = [_read(m.content) for m in messages]
        lang = language_of(sum(r.cjk for r in reads), sum(r.letters for r in reads))
        # (position, speaker, sentence, the dates it points to)
        sentences: list[tuple[int, str, _Sentence, list[str]]] = []
        speakers: list[str] = []  # the participants, each once, by name
        named = False
        for message, read in zip(messages, reads, strict=True):
            speaker, kind = _speaker(message, read.identity, lang)
            named = named or kind == "name"
            if speaker not in speakers and kind != "self":
                speakers.append(speaker)
            for sentence in read.sentences:
                dates = pointed_dates(sentence.text, message.timestamp)
                sentences.append((len(sentences), speaker, sentence, dates))
        if not sentences:
            return ""
        frequency = Counter(chain.from_iterable(item[2].unique for item in sentences))
        top = max(frequency.values())
        weight = [
            (1 + FACT_WEIGHT * (len(_CAPITALISED.findall(said.text)) + len(dates)))
            * (QUESTION_WEIGHT if said.text.endswith(("?", "？")) else 1.0)
            / top
            / said.root
            * said.short
            for _, _, said, dates in sentences
        ]
        said_before: set[str] = set()

        def score(i: int) -> float:
            unique = sentences[i][2].unique
            return weight[i] * sum(
                frequency[w] * (REPEATED if w in said_before else 1.0) for w in unique
            )

        budget = min(max(self.max_chars, CHARS_PER_MESSAGE * len(messages)), MOST_CHARS)
        chosen: list[int] = []
        # best first; a score only falls as more is said, so one is scored again only
        # when it comes to the top with a score from before the last choice (lazy greedy)
        heap = [(-score(i), i, 0) for i in range(len(sentences))]
        heapq.heapify(heap)
        while heap:
            _, best, seen = heapq.heappop(heap)
            if seen != len(chosen):
                heapq.heappush(heap, (-score(best), best, len(chosen)))
                continue
            _, speaker, sentence, dates = sentences[best]
            cost = len(sentence.text) + len(speaker) + 2 + sum(len(d) + 3 for d in dates)
            if cost <= budget or not chosen:
                chosen.append(best)
                budget -= cost
                said_before |= sentence.unique
        chosen.sort()
        # a speaker's consecutive sentences go under one name
        said: list[tuple[str, list[str]]] = []
        for i in chosen:
            _, speaker, sentence, dates = sentences[i]
            text = _dated(sentence.text, dates, lang)
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
        # a message without a closing mark still ends its sentence ("...Luna. I: Lovely!")
        ended = [[t if t.endswith(_ENDS) else f"{t}." for t in texts] for _, texts in said]
        return head + " ".join(
            f"{s}: {' '.join(texts)}" for (s, _), texts in zip(said, ended, strict=True)
        )


_ENDS = (".", "!", "?", "…", ";")


def _dated(text: str, dates: Sequence[str], lang: str) -> str:
    """The sentence with the dates its relative words meant, before its last mark."""
    if not dates:
        return text
    said = ", ".join(dates)
    end = len(text.rstrip("。！？!?.;；"))
    if lang == "zh":
        return f"{text[:end]}（{said}）{text[end:]}"
    return f"{text[:end]} ({said}){text[end:]}"


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
