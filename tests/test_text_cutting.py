"""Text cut by the quick paths gives what the general path gives, on any text.

The summariser, the recall index and the static embedder cut every message an
ingest replays; each has a quick path for the common case (ASCII text, single
spaces) and the general one it must agree with exactly, or summaries and
vectors would depend on which path a text took.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from partner_memory.ascii_text import alnum_runs, letters, lower_alnum_runs
from partner_memory.ingest import read_transcript
from partner_memory.recall import chunk_vectors
from partner_memory.rolling import summarize
from partner_memory.sentences import SENTENCE
from tests.helpers import LOCOMO_DIR, needs_locomo

#: Words jieba cuts otherwise than at spaces and punctuation, and ordinary ones.
WORDS = [
    "AT&T", "c++", "C#", "3.14", "e-mail", "U.S.A.", "100%", "self-care", "a_b", "IBM",
    "iPhone", "hello.", "world...", "end.", "x.y", "...", "Mr.", "don't", "I'm", "the",
    "and", "2023", "7th", "co-op", "#tag", "50%off", "v1.2.3", "snake_case", "..a",
]  # fmt: skip
ascii_text = st.lists(
    st.one_of(
        st.sampled_from(WORDS),
        st.text(alphabet="abcXYZ019 .,;:!?'\"()[]/@$^*=~`<>|\t\n+#&_%-", max_size=12),
    ),
    max_size=25,
).map(" ".join)


def _locomo_sentences() -> list[str]:
    said = [
        m.content
        for path in sorted(LOCOMO_DIR.glob("conv-*.json"))
        for m in read_transcript(path).messages
    ]
    return [found.group().strip() for text in said for found in SENTENCE.finditer(text)]


@settings(max_examples=3000, deadline=None)
@given(text=ascii_text)
def test_an_ascii_sentence_has_the_words_jieba_gives(text: str) -> None:
    assert summarize._segment(text) == summarize._jieba_words(text)
    plain = text.isascii() and summarize._JIEBA_CUTS.search(text) is None
    assert summarize._cut_at_runs(text) == plain


@needs_locomo
def test_every_locomo_sentence_has_the_words_jieba_gives() -> None:
    sentences = _locomo_sentences()
    quick = [s for s in sentences if summarize._cut_at_runs(s)]
    assert len(quick) > len(sentences) / 2  # the quick path is the common one
    assert quick == [s for s in sentences if s.isascii() and not summarize._JIEBA_CUTS.search(s)]
    assert [summarize._segment(s) for s in sentences] == [
        summarize._jieba_words(s) for s in sentences
    ]


@settings(max_examples=3000, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab  c\n\t▁东 .xé🙂")), min_size=1, max_size=30))
def test_a_text_has_the_chunks_the_pattern_finds(text: str) -> None:
    found = chunk_vectors._CHUNK.findall("▁" + text.replace(" ", "▁"))
    assert chunk_vectors._chunks(text) == [chunk for chunk in found if chunk]


@given(text=st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_ascii_runs_and_letters_are_counted_as_patterns_would(text: str) -> None:
    assert alnum_runs(text) == re.findall("[A-Za-z0-9]+", text)
    assert lower_alnum_runs(text) == re.findall("[a-z0-9]+", text.lower())
    assert letters(text) == len(re.findall("[A-Za-z]", text))
