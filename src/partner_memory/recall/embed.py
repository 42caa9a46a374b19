"""Dense similarity for recall: a text's meaning as a small vector.

Recall ranks by words first (BM25); the best `DENSE_CANDIDATES` are then
rescored with the cosine between the query's vector and each message's
(read, like its words, together with its neighbours), and the messages
nearest the query join them when its words find nothing as close. Measured
on the LoCoMo dev conversations this adds about one point of recall@10
(78.7 -> 79.6) with the default model: WordLlama's static embeddings, whose wheel ships
the weights (no torch, no download; ~20 µs a message, 0.1 ms a query),
truncated to 128 dimensions. Any OpenAI-compatible `/v1/embeddings`
endpoint can be used instead.

Vectors are stored as 128 signed bytes (each vector scaled by its largest
component): cosines are computed after normalising again, so the scale
needs no storing, and the loss is below what we can measure.

Work per text is bounded whatever a message holds: only its first
`EMBED_MESSAGE_CHARS` are read, in pieces of `EMBED_PIECE_CHARS` embedded in
batches of similar length (a batch pads to its longest piece), and a long
text's vector is the length-weighted mean of its pieces' (for the static
model's mean pooling that is, up to piece edges, the vector of the whole).

Vectors made by different models cannot be compared, so the index remembers
which embedder made a namespace's vectors (`Embedder.name`); a service with
another embedder searches by words only until `reindex` rebuilds them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from partner_memory.errors import ConfigurationError, EmbeddingRejected, LLMError
from partner_memory.host_logging import root_logging_kept
from partner_memory.recall.chunk_vectors import ChunkVectors, fits

if TYPE_CHECKING:
    import numpy as np

#: What a namespace's index records when its vectors were made by no embedder.
NO_EMBEDDER = "none"
#: Dimensions kept of the static model's vectors (its Matryoshka training keeps the
#: leading ones meaningful): 128 measured as good as 256 at half the bytes.
STATIC_DIMENSIONS = 128
#: Characters of a text read for its meaning (a pasted document is known by its start).
EMBED_MESSAGE_CHARS = 32_000
#: Characters per piece: ~500 tokens, under every endpoint's input limit.
EMBED_PIECE_CHARS = 2_000
#: Pieces per call: with the piece size, at most ~32k tokens padded per batch (16 MB for
#: the static model; one request of ~128k characters to an endpoint).
EMBED_BATCH = 64


class Embedder(Protocol):
    """Turns texts into vectors; `name` says which vectors can be compared."""

    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text."""
        ...

    def warm(self) -> None:
        """Load what the first `embed` would, so a server pays it before it is ready."""
        ...


class StaticEmbedder:
    """WordLlama (`l2_supercat`), loaded from its own wheel on first use.

    When its tokenizer has the shape `chunk_vectors` relies on (the shipped one
    does), the tokenizer and the weights are read straight from the wheel's
    files with `tokenizers` and `safetensors`, as WordLlama's loader reads them:
    importing `wordllama` (and `requests`, and its configs) took as long again
    as loading the model, which the analysis worker of every ingest paid before
    it could start. Otherwise WordLlama itself is loaded and embeds."""

    def __init__(self, dimensions: int = STATIC_DIMENSIONS) -> None:
        self.dimensions = dimensions
        self._model: Any = None  # WordLlama itself, when the chunks do not fit
        self._chunks: ChunkVectors | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"wordllama-l2_supercat-{self.dimensions}"

    @property
    def loaded(self) -> bool:
        return self._chunks is not None or self._model is not None

    def _load(self) -> None:
        with self._lock:
            if self.loaded:
                return
            files = _wheel_files()
            if files is not None:
                import numpy as np
                from safetensors import safe_open
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(files[1]))
                if fits(tokenizer):
                    with safe_open(str(files[0]), framework="np", device="cpu") as weights:
                        table = weights.get_tensor(_TENSOR)[:, : self.dimensions]
                    # as WordLlamaInference keeps it: float32, rows contiguous
                    table = np.ascontiguousarray(table.astype(np.float32))
                    self._chunks = ChunkVectors(tokenizer, table)
                    return
            self._model = self._wordllama()

    def wordllama(self) -> Any:
        """WordLlama's own model (`WordLlamaInference`), loaded now if it was not: the
        reference the chunked vectors are checked against."""
        with self._lock:
            if self._model is None:
                self._model = self._wordllama()
            return self._model

    def _wordllama(self) -> Any:
        # its import calls logging.basicConfig(level=INFO): the host's logging
        # would start printing the application's INFO records
        with root_logging_kept():
            import wordllama
        # The wheel carries the weights and tokenizer; cache_dir points the
        # loader at them, and downloads are off: nothing leaves the machine.
        return wordllama.WordLlama.load(
            dim=_WHEEL_DIMENSIONS,
            trunc_dim=self.dimensions,
            cache_dir=Path(wordllama.__file__).parent,
            disable_download=True,
        )

    def warm(self) -> None:
        self.embed(["warm"])  # the tokenizer's first use costs something too

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The mean of each text's token vectors: from remembered chunks
        (`chunk_vectors`), else as WordLlama's own `embed` computes it."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        self._load()
        if self._chunks is not None:  # the same means, each chunk tokenised once
            return self._chunks.embed(texts)
        return np.asarray(self._model.embed(list(texts), norm=False), dtype=np.float32)


#: The wheel's model: its widest vectors, the weights' tensor, and its files (as
#: WordLlama's loader names them under its package directory).
_WHEEL_DIMENSIONS = 256
_TENSOR = "embedding.weight"
_WEIGHTS = f"weights/l2_supercat_{_WHEEL_DIMENSIONS}.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"


def _wheel_files() -> tuple[Path, Path] | None:
    """The wheel's weights and tokenizer files, found without importing `wordllama`;
    None if they are not where its loader keeps them (it then finds them itself)."""
    import importlib.util

    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        return None
    home = Path(next(iter(spec.submodule_search_locations)))
    weights, tokenizer = home / _WEIGHTS, home / _TOKENIZER
    return (weights, tokenizer) if weights.is_file() and tokenizer.is_file() else None


class EndpointEmbedder:
    """An OpenAI-compatible `/v1/embeddings` endpoint (the SDK does retries and timeouts);
    every failure is an `LLMError`, like the chat client's."""

    def __init__(self, settings: EmbeddingSettings) -> None:
        import openai

        self.settings = settings
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key,
            timeout=settings.timeout_s,
            max_retries=settings.max_retries,
        )

    @property
    def name(self) -> str:
        return f"endpoint:{self.settings.model}"

    def warm(self) -> None:
        """Nothing to load; the endpoint is not called (it may not be up yet)."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np
        import openai

        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        try:
            answer = self._client.embeddings.create(model=self.settings.model, input=list(texts))
            rows = sorted(answer.data, key=lambda d: d.index)
            matrix = np.asarray([row.embedding for row in rows], dtype=np.float32)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            raise EmbeddingRejected(f"embeddings endpoint refused the texts: {exc}") from exc
        except (openai.OpenAIError, ValueError, TypeError, AttributeError) as exc:
            raise LLMError(f"embeddings endpoint failed: {type(exc).__name__}: {exc}") from exc
        if matrix.ndim != 2 or len(matrix) != len(texts) or not np.isfinite(matrix).all():
            raise LLMError(
                f"embeddings endpoint returned {matrix.shape} values for {len(texts)} texts"
            )
        return matrix


@dataclass(frozen=True, slots=True)
class EmbeddingSettings:
    """Which embedder recall uses, read from PARTNER_MEMORY_EMBEDDINGS* when asked.

    `PARTNER_MEMORY_EMBEDDINGS`: `static` (the default), `off`, `encoder` (a sentence
    encoder run here, `recall.encoder`; `..._MODEL` names a directory or package, the
    `encoder` extra's by default), or `endpoint` (also chosen by setting
    `PARTNER_MEMORY_EMBEDDINGS_BASE_URL`, with `..._MODEL` and optionally
    `..._API_KEY`). `PARTNER_MEMORY_ANALYSIS_WORKER=off` keeps an
    ingest's or a busy service's analysis and summaries in its own process
    (`analysis_worker`)."""

    kind: str = "static"
    base_url: str = ""
    model: str = ""
    api_key: str = field(default="not-needed", repr=False)
    timeout_s: float = 30.0
    max_retries: int = 2
    analysis_worker: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EmbeddingSettings:
        env = os.environ if environ is None else environ
        base_url = env.get("PARTNER_MEMORY_EMBEDDINGS_BASE_URL", "").strip()
        kind = env.get("PARTNER_MEMORY_EMBEDDINGS", "").strip().lower()
        kind = kind or ("endpoint" if base_url else "static")
        if kind not in KINDS:
            raise ConfigurationError(
                f"PARTNER_MEMORY_EMBEDDINGS must be one of {', '.join(KINDS)}, got {kind!r}"
            )
        switch = env.get("PARTNER_MEMORY_ANALYSIS_WORKER", "on").strip().lower() or "on"
        if switch not in _SWITCH:
            raise ConfigurationError(
                f"PARTNER_MEMORY_ANALYSIS_WORKER must be on or off, got {switch!r}"
            )
        worker = _SWITCH[switch]
        model = env.get("PARTNER_MEMORY_EMBEDDINGS_MODEL", "").strip()
        if kind == "encoder":
            return cls.encoder(model, analysis_worker=worker)
        if kind != "endpoint":
            return cls(kind, analysis_worker=worker)
        if not base_url or not model:
            raise ConfigurationError(
                "embeddings from an endpoint need PARTNER_MEMORY_EMBEDDINGS_BASE_URL"
                " and PARTNER_MEMORY_EMBEDDINGS_MODEL"
            )
        api_key = env.get("PARTNER_MEMORY_EMBEDDINGS_API_KEY", "").strip() or "not-needed"
        return cls(kind, base_url, model, api_key, analysis_worker=worker)

    @classmethod
    def encoder(cls, model: str = "", *, analysis_worker: bool = True) -> EmbeddingSettings:
        """A sentence encoder run here (`recall.encoder`): `model` a directory or an
        installed package ("" the default); a `ConfigurationError` now if it is missing."""
        from partner_memory.recall.encoder import locate

        locate(model)
        return cls("encoder", model=model, analysis_worker=analysis_worker)

    def embedder(self) -> Embedder | None:
        if self.kind == "off":
            return None
        if self.kind == "endpoint":
            return EndpointEmbedder(self)
        if self.kind == "encoder":
            from partner_memory.recall.encoder import shared_encoder

            return shared_encoder(self.model)
        return _static()


#: The embedders `PARTNER_MEMORY_EMBEDDINGS` chooses from.
KINDS = ("static", "encoder", "endpoint", "off")


_SWITCH = {"on": True, "1": True, "true": True, "off": False, "0": False, "false": False}

_STATIC: list[StaticEmbedder] = []
_STATIC_LOCK = threading.Lock()


def _static() -> StaticEmbedder:
    """One static model per process (it is read-only and thread-safe once loaded); two
    services made at once in two threads share it too."""
    with _STATIC_LOCK:
        if not _STATIC:
            _STATIC.append(StaticEmbedder())
        return _STATIC[0]


def embed_bounded(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """`embedder.embed(texts)` with bounded work per text and per call (module docstring)."""
    import numpy as np

    pieces: list[str] = []
    owners: list[int] = []
    for owner, text in enumerate(texts):
        read = text[:EMBED_MESSAGE_CHARS]
        for start in range(0, max(len(read), 1), EMBED_PIECE_CHARS):
            pieces.append(read[start : start + EMBED_PIECE_CHARS])
            owners.append(owner)
    if not pieces:
        return embedder.embed([])
    order = sorted(range(len(pieces)), key=lambda k: len(pieces[k]))
    made: np.ndarray | None = None
    for start in range(0, len(order), EMBED_BATCH):
        batch = order[start : start + EMBED_BATCH]
        vectors = embedder.embed([pieces[k] for k in batch])
        if made is None:
            made = np.zeros((len(pieces), vectors.shape[1]), dtype=np.float32)
        made[batch] = vectors
    assert made is not None
    if len(pieces) == len(texts):
        return made
    weights = np.asarray([max(len(p), 1) for p in pieces], dtype=np.float32)
    combined = np.zeros((len(texts), made.shape[1]), dtype=np.float32)
    np.add.at(combined, owners, made * weights[:, None])
    totals = np.zeros(len(texts), dtype=np.float32)
    np.add.at(totals, owners, weights)
    result: np.ndarray = combined / totals[:, None]
    return result


def pack(matrix: np.ndarray) -> list[bytes]:
    """Each row as signed bytes, scaled so its largest component is 127."""
    import numpy as np

    largest = np.abs(matrix).max(axis=1, keepdims=True) if len(matrix) else matrix
    scaled = np.divide(matrix * 127.0, largest, out=np.zeros_like(matrix), where=largest > 0)
    return [row.tobytes() for row in np.rint(scaled).astype(np.int8)]


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (rows of zeros stay zero)."""
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    scaled: np.ndarray = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return scaled
