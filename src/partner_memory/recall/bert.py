"""A BERT sentence encoder's forward pass in numpy, from `safetensors` weights.

The layout is sentence-transformers' (`config.json`, `model.safetensors`,
`tokenizer.json`, optionally `1_Pooling/config.json` and
`sentence_bert_config.json`), as a model's own repository or a package that
ships it holds it: no torch, and nothing fetched. Mean pooling over the
tokens (or the first token's, if the pooling file says so), then length 1.
GELU is the tanh form: within 1e-3 of the exact one, well below what a
cosine between two sentences resolves.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from partner_memory.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np

#: Tokens read of a text when the model does not say (sentence-transformers' usual).
DEFAULT_MAX_TOKENS = 256
#: The files a model directory must hold.
REQUIRED = ("config.json", "model.safetensors", "tokenizer.json")


@dataclass(frozen=True, slots=True)
class BertShape:
    layers: int
    heads: int
    hidden: int
    eps: float
    max_tokens: int
    cls_pooling: bool


def is_model_dir(path: Path) -> bool:
    return all((path / name).is_file() for name in REQUIRED)


def read_shape(path: Path) -> BertShape:
    """What `path`'s files say of the model, or a `ConfigurationError` naming the file."""
    try:
        config = json.loads((path / "config.json").read_text("utf-8"))
        pooling_file = path / "1_Pooling" / "config.json"
        pooling = json.loads(pooling_file.read_text("utf-8")) if pooling_file.is_file() else {}
        st_file = path / "sentence_bert_config.json"
        st = json.loads(st_file.read_text("utf-8")) if st_file.is_file() else {}
        if config.get("model_type", "bert") not in ("bert", "xlm-roberta", "roberta"):
            raise ValueError(f"model_type {config.get('model_type')!r} is not BERT-like")
        return BertShape(
            layers=int(config["num_hidden_layers"]),
            heads=int(config["num_attention_heads"]),
            hidden=int(config["hidden_size"]),
            eps=float(config.get("layer_norm_eps", 1e-12)),
            max_tokens=int(st.get("max_seq_length", DEFAULT_MAX_TOKENS)),
            cls_pooling=bool(pooling.get("pooling_mode_cls_token", False)),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"encoder model in {path} is not usable: {exc}") from exc


class BertEncoder:
    """The forward pass over one model directory's weights (read-only once loaded:
    safe to call from several threads)."""

    def __init__(self, path: Path, shape: BertShape) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.shape = shape
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.enable_truncation(shape.max_tokens)
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        raw = load_file(str(path / "model.safetensors"))
        self._w = {_plain(name): _float32(value) for name, value in raw.items()}
        missing = [n for n in _NEEDED if n not in self._w]
        if missing:
            raise ConfigurationError(
                f"encoder model in {path} lacks the weights {missing[:3]} (not a BERT encoder)"
            )
        self.dimensions = int(self._w["embeddings.word_embeddings.weight"].shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit row per text, batched by the caller (pads to the longest text)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        length = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), length), dtype=np.int64)
        mask = np.zeros((len(texts), length), dtype=np.float32)
        types = np.zeros((len(texts), length), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            types[row, : len(encoding.ids)] = encoding.type_ids
            mask[row, : len(encoding.ids)] = 1.0
        hidden = self._forward(ids, types, mask)
        if self.shape.cls_pooling:
            pooled = hidden[:, 0, :]
        else:
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return result

    def _forward(self, ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import numpy as np

        w, shape = self._w, self.shape
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _norm(x, w, "embeddings.LayerNorm", shape.eps)
        heads, size = shape.heads, shape.hidden // shape.heads
        blocked = ((1.0 - mask) * -1e9)[:, None, None, :]
        scale = 1.0 / math.sqrt(size)
        for n in range(shape.layers):
            at = f"encoder.layer.{n}."

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

            q = split(_linear(x, w, at + "attention.self.query"))
            k = split(_linear(x, w, at + "attention.self.key"))
            v = split(_linear(x, w, at + "attention.self.value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + blocked
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, shape.hidden)
            attended = _linear(context, w, at + "attention.output.dense")
            x = _norm(x + attended, w, at + "attention.output.LayerNorm", shape.eps)
            inner = _gelu(_linear(x, w, at + "intermediate.dense"))
            x = _norm(
                x + _linear(inner, w, at + "output.dense"), w, at + "output.LayerNorm", shape.eps
            )
        return x


_NEEDED = (
    "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight",
    "encoder.layer.0.attention.self.query.weight",
)


def _plain(name: str) -> str:
    """A weight's name without the model's prefix (`bert.`, `roberta.`, `model.`)."""
    for prefix in ("bert.", "roberta.", "model."):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _float32(value: Any) -> np.ndarray:
    import numpy as np

    array: np.ndarray = np.ascontiguousarray(value, dtype=np.float32)
    return array


def _linear(x: np.ndarray, w: dict[str, np.ndarray], name: str) -> np.ndarray:
    result: np.ndarray = x @ w[name + ".weight"].T + w[name + ".bias"]
    return result


def _norm(x: np.ndarray, w: dict[str, np.ndarray], name: str, eps: float) -> np.ndarray:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    result: np.ndarray = centred / np.sqrt(variance + eps) * w[name + ".weight"] + w[name + ".bias"]
    return result


def _gelu(x: np.ndarray) -> np.ndarray:
    import numpy as np

    result: np.ndarray = 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))
    return result
