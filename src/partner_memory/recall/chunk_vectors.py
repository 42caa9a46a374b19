"""The static model's vectors by chunk of text, each chunk tokenised once.

WordLlama's tokenizer is Llama 2's SentencePiece BPE: spaces become "▁", there
is no pre-tokenizer, and no token runs from a character into a following "▁".
So a text's tokens are the tokens of its chunks (a chunk: a run of "▁" and the
characters up to the next one), and its mean token vector - the static
embedding - is the sum of its chunks' token vectors over their token count.
Chunks recur as words do: each is tokenised and summed once, then looked up,
which costs a fifth of tokenising every text (the tokenizer was a third of an
ingest's analysis). `fits` checks the tokenizer has that shape; the embedder
tokenises as before when it does not.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: The normaliser chunking relies on: "▁" first, then every space as "▁".
_NORMALIZER = [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
]
_CHUNK = re.compile("▁*[^▁]*")
#: Chunks remembered at most (their sums take 16 MB at 128 dimensions), and characters
#: of them (long runs without a space, such as pasted data, are rare and big); past
#: either, all are forgotten and learnt again.
MOST_CHUNKS = 1 << 15
MOST_CHARS = 1 << 22


def fits(tokenizer: Any) -> bool:
    """Whether `tokenizer` tokenises a text as the concatenation of its chunks'
    tokens (the shape described above). Read from its parts: its whole description
    as JSON took a tenth of a second, which every process loading the model paid."""
    from tokenizers import models

    normalizer = tokenizer.normalizer
    described = json.loads(normalizer.__getstate__()) if normalizer is not None else {}
    return (
        tokenizer.pre_tokenizer is None
        and described.get("type") == "Sequence"
        and described.get("normalizers") == _NORMALIZER
        and isinstance(tokenizer.model, models.BPE)
        # no token has "▁" after another character (one search over all of them)
        and re.search("[^▁\n]▁", "\n".join(tokenizer.get_vocab())) is None
    )


def _chunks(text: str) -> list[str]:
    """The chunks of a non-empty text, none empty. With single spaces between words
    (most text), each space starts a chunk: cut by `str.split`. Matching `_CHUNK` over
    the text turned into wide characters was a tenth of an ingest's analysis."""
    if "  " in text or "▁" in text or text.startswith(" "):
        return [chunk for chunk in _CHUNK.findall("▁" + text.replace(" ", "▁")) if chunk]
    return ("▁" + text.replace(" ", " ▁")).split(" ")


class ChunkVectors:
    """Mean token vectors of texts, from remembered per-chunk sums."""

    def __init__(self, tokenizer: Any, table: np.ndarray) -> None:
        import numpy as np

        self._model = tokenizer.model
        self._table = table
        self._index: dict[str, int] = {}
        self._chars = 0
        # room for every chunk remembered, reserved now and filled as chunks come (the
        # pages are the system's zeros until written): growing it as they came copied
        # it each time, a tenth of the analysis of new text
        self._sums = np.zeros((MOST_CHUNKS, table.shape[1]), dtype=np.float32)
        self._tokens: list[int] = []  # each remembered chunk's token count
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        made = np.zeros((len(texts), self._table.shape[1]), dtype=np.float32)
        counts = np.ones(len(texts), dtype=np.float32)  # a text without chunks: zeros / 1
        split = [_chunks(text) if text else [] for text in texts]
        with self._lock:
            if len(self._index) >= MOST_CHUNKS or self._chars >= MOST_CHARS:
                self._index.clear()
                self._tokens.clear()
                self._chars = 0
            index = self._index
            new = {c: None for chunks in split for c in chunks if c not in index}
            if new:
                self._learn(list(new))
            # Text by text: numpy's reduceat over all of them at once adds along the
            # strided axis and took four times as long as a sum per text.
            take, add, tokens = self._sums.take, np.add.reduce, self._tokens.__getitem__
            for at, chunks in enumerate(split):
                rows = [index[c] for c in chunks]
                if rows:
                    add(take(rows, axis=0), axis=0, out=made[at])
                    counts[at] = max(sum(map(tokens, rows)), 1)
        made /= counts[:, None]
        return made

    def _learn(self, chunks: list[str]) -> None:
        """Tokenise new chunks, keep each one's summed token vector and token count (lock
        held). Chunks of n tokens are summed together, n at a time: numpy's cost per call
        is more than a chunk's own work, and `reduceat` over all of them took twice as
        long."""
        import numpy as np

        tokens = [[t.id for t in self._model.tokenize(chunk)] for chunk in chunks]
        first = len(self._index)
        end = first + len(chunks)
        while end > len(self._sums):  # past MOST_CHUNKS within one call: room for twice as many
            self._sums = np.concatenate([self._sums, np.zeros_like(self._sums)])
        sums = self._sums[first:end]
        sums.fill(0)  # a chunk of no tokens sums to zeros (the rows may hold forgotten ones)
        by_length: dict[int, list[int]] = {}
        for at, found in enumerate(tokens):
            by_length.setdefault(len(found), []).append(at)
        last = len(self._table) - 1
        for length, members in by_length.items():
            if length:
                ids = np.asarray([tokens[at] for at in members], dtype=np.intp)
                np.clip(ids, 0, last, out=ids)
                sums[members] = self._table[ids].sum(axis=1, dtype=np.float32)
        self._tokens += map(len, tokens)
        for at, chunk in enumerate(chunks, start=first):
            self._index[chunk] = at
            self._chars += len(chunk)
