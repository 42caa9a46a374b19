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
    tokens (the shape described above)."""
    described = json.loads(tokenizer.to_str())
    normalizer = described.get("normalizer") or {}
    return (
        described.get("pre_tokenizer") is None
        and normalizer.get("type") == "Sequence"
        and normalizer.get("normalizers") == _NORMALIZER
        and (described.get("model") or {}).get("type") == "BPE"
        and not any(re.search("[^▁]▁", token) for token in tokenizer.get_vocab())
    )


class ChunkVectors:
    """Mean token vectors of texts, from remembered per-chunk sums."""

    def __init__(self, tokenizer: Any, table: np.ndarray) -> None:
        import numpy as np

        self._model = tokenizer.model
        self._table = table
        self._index: dict[str, int] = {}
        self._chars = 0
        self._sums = np.zeros((1024, table.shape[1]), dtype=np.float32)
        self._counts = np.zeros(1024, dtype=np.float32)
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        made = np.zeros((len(texts), self._table.shape[1]), dtype=np.float32)
        with self._lock:
            if len(self._index) >= MOST_CHUNKS or self._chars >= MOST_CHARS:
                self._index.clear()
                self._chars = 0
            index, learn = self._index, self._learn
            flat: list[int] = []
            lengths: list[int] = []
            for text in texts:
                before = len(flat)
                if text:
                    for chunk in _CHUNK.findall("▁" + text.replace(" ", "▁")):
                        if chunk:
                            at = index.get(chunk)
                            flat.append(learn(chunk) if at is None else at)
                lengths.append(len(flat) - before)
            if not flat:
                return made
            sizes = np.asarray(lengths, dtype=np.intp)
            spoken = sizes > 0  # a text without chunks keeps a vector of zeros
            starts = (np.cumsum(sizes) - sizes)[spoken]
            chunks = np.asarray(flat, dtype=np.intp)
            sums = np.add.reduceat(self._sums[chunks], starts, axis=0)
            counts = np.add.reduceat(self._counts[chunks], starts)
        made[spoken] = sums / np.maximum(counts, 1.0)[:, None]
        return made

    def _learn(self, chunk: str) -> int:
        """Tokenise a new chunk, keep its tokens' summed vector and count (lock held)."""
        import numpy as np

        ids = np.asarray([t.id for t in self._model.tokenize(chunk)], dtype=np.intp)
        np.clip(ids, 0, len(self._table) - 1, out=ids)
        at = len(self._index)
        if at == len(self._counts):  # room for twice as many
            self._sums = np.concatenate([self._sums, np.zeros_like(self._sums)])
            self._counts = np.concatenate([self._counts, np.zeros_like(self._counts)])
        self._sums[at] = self._table[ids].sum(axis=0, dtype=np.float32)
        self._counts[at] = len(ids)
        self._index[chunk] = at
        self._chars += len(chunk)
        return at
