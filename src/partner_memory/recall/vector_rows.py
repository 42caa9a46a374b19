"""Each message's vectors in a file beside the index: its own, and mixed with its
neighbours', read through a memory map."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from partner_memory.recall.index_layout import IndexState
from partner_memory.recall.ranking import unit_vector

if TYPE_CHECKING:
    import numpy as np


class VectorRows:
    """Each message's vectors in a file the index's messages point into (`vecno`): a row
    of signed bytes holds its own vector (what `nearest` compares: a message alone finds
    a paraphrase best, 63 % of the suite at 5 against 48 % mixed) and then its vector
    mixed with its neighbours' (what rescoring compares). Read through a memory map, so a
    search reads the rows of its candidates only. Rows are only ever appended (a message
    rewritten gets a new row), and a rebuild starts a new file, so a reader's map is never
    cut short under it."""

    def __init__(self, directory: Path | None) -> None:
        self._directory = directory
        self._memory = bytearray()  # the rows when the index is in memory
        self._mapped: np.ndarray | None = None
        self._name: str | None = None
        #: The rows normalised, for `nearest`: (file, first, end) they are of, and the copy.
        self._normal: tuple[tuple[str | None, int, int], np.ndarray] | None = None

    def nearest(
        self, state: IndexState, vector: np.ndarray, count: int, start: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """The `count` rows from `start` on nearest `vector` by cosine, compared exactly
        (best first), and their cosines."""
        import numpy as np

        normal = self._normalised(state, start)
        query = unit_vector(vector)
        cosine = normal @ query
        count = min(count, len(cosine))
        if count <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        top = np.argpartition(-cosine, count - 1)[:count]
        order = top[np.argsort(-cosine[top], kind="stable")]
        return order + start, cosine[order]

    def own(self, state: IndexState, start: int) -> np.ndarray:
        """The own vectors of rows `[start, rows)`."""
        return self._matrix(state)[start : state.rows, : state.dimensions]

    def _normalised(self, state: IndexState, start: int) -> np.ndarray:
        """Rows `[start, rows)` at length 1, kept and extended as rows are added."""
        import numpy as np

        from partner_memory.recall.embed import unit_rows

        held = self._normal
        if held is not None and held[0] == (state.vectors, start, state.rows):
            return held[1]
        same = held is not None and held[0][:2] == (state.vectors, start)
        before = held[1] if held is not None and same else None
        done = 0 if before is None else min(len(before), state.rows - start)
        fresh = unit_rows(np.asarray(self.own(state, start + done), dtype=np.float32))
        normal = fresh if before is None or not done else np.concatenate([before[:done], fresh])
        self._normal = ((state.vectors, start, state.rows), normal)
        return normal

    def append(self, state: IndexState, vectors: list[tuple[bytes, bytes]]) -> int:
        """Write each (own, mixed) pair as a row (durably, before the commit that points
        at them); returns the number of the first."""
        first = state.rows
        if not vectors:
            return first
        width = 2 * state.dimensions
        rows = [own + mixed for own, mixed in vectors]
        if self._directory is None:
            del self._memory[first * width :]  # rows of an add that failed before its commit
            for row in rows:
                self._memory += row
        else:
            if state.vectors is None:
                state.vectors = f"vectors-{uuid.uuid4().hex}.i8"
            with open(self._directory / state.vectors, "r+b" if first else "wb") as out:
                out.seek(first * width)
                out.truncate()
                for row in rows:
                    out.write(row)
                out.flush()
                os.fsync(out.fileno())
        state.rows = first + len(rows)
        return first

    def read(self, state: IndexState, numbers: np.ndarray, alone: np.ndarray) -> np.ndarray | None:
        """The vectors of rows `numbers` (-1: none) as float32, zeros where a message has
        none: mixed with the neighbours', or its own where `alone`."""
        import numpy as np

        width = state.dimensions
        if not width or not state.rows:
            return None
        matrix = self._matrix(state)
        out = np.zeros((len(numbers), width), dtype=np.float32)
        for own, half in ((False, slice(width, None)), (True, slice(0, width))):
            held = (numbers >= 0) & (numbers < len(matrix)) & (alone == own)
            out[held] = matrix[numbers[held], half]
        return out

    def _matrix(self, state: IndexState) -> np.ndarray:
        import numpy as np

        width = 2 * state.dimensions
        mapped = self._mapped
        if mapped is None or self._name != state.vectors or len(mapped) != state.rows:
            if self._directory is None:  # a copy, made again only when rows were added
                held = bytes(self._memory[: state.rows * width])
                mapped = np.frombuffer(held, dtype=np.int8).reshape(-1, width)
            else:
                path = self._directory / str(state.vectors)  # the committed rows only
                mapped = np.memmap(path, dtype=np.int8, mode="r", shape=(state.rows, width))
            self._mapped, self._name = mapped, state.vectors
        return mapped

    def drop_old(self, state: IndexState) -> None:
        """Delete the files of earlier rebuilds (a reader still mapping one keeps it)."""
        if self._directory is None:
            return
        for path in self._directory.glob("vectors-*.i8"):
            if path.name != state.vectors:
                path.unlink(missing_ok=True)


def mixed(own: bytes, beside: Sequence[bytes | None]) -> bytes:
    """A message's vector with its neighbours' at half weight, as signed bytes again."""
    import numpy as np

    from partner_memory.recall.embed import pack, unit_rows

    width = len(own)
    rows = [np.frombuffer(own, dtype=np.int8)] + [
        np.frombuffer(v, dtype=np.int8) for v in beside if v is not None and len(v) == width
    ]
    normed = unit_rows(np.stack(rows).astype(np.float32))
    total = normed[0] + 0.5 * normed[1:].sum(axis=0)
    return pack(total.reshape(1, -1))[0]
