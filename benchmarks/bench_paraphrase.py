"""Paraphrases in a realistic namespace: questions that share no content word with
what was remembered, each memory said in passing among ordinary conversation.

`data/paraphrases.json` holds pairs of a remembered sentence and a question about
it whose analysed terms do not overlap (checked by `tests/test_recall_paraphrases`),
in English and Chinese. The layout (`layout`): every sentence is said by the user
at a random place among the turns of LoCoMo dev conversations (`FILLER` ordinary
messages), over `SESSIONS` sessions a day apart, each rolled; so each question has
hundreds of ordinary messages and all the other sentences as distractors. A
question scores when its sentence is first (hit@1) or among the top `--k`.

Printed per language for each embedder this install has: the static default, the
`encoder` (if its package is installed), an endpoint (if
PARTNER_MEMORY_EMBEDDINGS_BASE_URL is set), and words alone as the reference; each
as recall runs (fusion 1: the nearest by meaning lead when the words hold little of
the question and meaning found something nearer, see `RecallEngine`) and with
fusion 0 (meaning only rescores and joins, it never leads).

Usage: python benchmarks/bench_paraphrase.py [--k 5] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import time
from pathlib import Path

from partner_memory import Message, PartnerMemory, open_store
from partner_memory.errors import ConfigurationError
from partner_memory.recall.embed import EmbeddingSettings
from partner_memory.recall.engine import FUSION, RecallEngine

HERE = Path(__file__).resolve().parent
PAIRS = HERE / "data" / "paraphrases.json"
LOCOMO = Path(
    os.environ.get(
        "PARTNER_MEMORY_LOCOMO_DIR", HERE.parent.parent / "shared" / "data" / "locomo-dev"
    )
)
#: Ordinary messages around the sentences, and the rolled sessions they are spread over.
FILLER, SESSIONS = 400, 10
DAY_MS = 86_400_000
START_MS = 1_767_225_600_000  # 2026-01-01


def pairs() -> list[tuple[str, str]]:
    return [(said, asked) for said, asked in json.loads(PAIRS.read_text("utf-8"))]


def language(text: str) -> str:
    return "zh" if re.search(r"[\u4e00-\u9fff]", text) else "en"


def filler(count: int, locomo: Path = LOCOMO) -> list[str]:
    """The first `count` turns of the LoCoMo dev conversations, in order."""
    texts: list[str] = []
    for path in sorted(locomo.glob("conv-*.json")):
        conversation = json.loads(path.read_text("utf-8"))
        sessions = sorted(
            (k for k in conversation if re.fullmatch(r"session_\d+", k)),
            key=lambda k: int(k.split("_")[1]),
        )
        for session in sessions:
            texts += [turn["text"] for turn in conversation[session] if turn.get("text")]
            if len(texts) >= count:
                return texts[:count]
    raise SystemExit(f"{locomo} holds fewer than {count} turns")


def layout(said: list[str], seed: int, locomo: Path = LOCOMO) -> list[list[Message]]:
    """Sessions of messages: the filler in order, alternating speakers, each sentence
    put by the user at a random place (the same for every embedder)."""
    ordinary = filler(FILLER, locomo)
    places = random.Random(seed).sample(range(FILLER), len(said))
    at = dict(zip(places, said, strict=True))
    per = FILLER // SESSIONS
    sessions: list[list[Message]] = []
    for s in range(SESSIONS):
        clock = START_MS + s * DAY_MS
        messages: list[Message] = []
        for i in range(s * per, (s + 1) * per):
            if i in at:
                messages.append(Message("user", at[i], timestamp=clock))
                clock += 60_000
            role = "user" if i % 2 == 0 else "assistant"
            messages.append(Message(role, ordinary[i], timestamp=clock))
            clock += 60_000
        sessions.append(messages)
    return sessions


Rates = dict[str, tuple[float, float, int]]


def score(
    embeddings: EmbeddingSettings, k: int, seed: int, fusions: tuple[float, ...] = (FUSION,)
) -> tuple[dict[float, Rates], float]:
    """For each fusion weight (`RecallEngine`'s `fusion`; `FUSION` is what recall does),
    per language: hit@1, hit@k and the number of questions; and the seconds taken."""
    asked = pairs()
    started = time.perf_counter()
    store = open_store("memory://")
    with PartnerMemory(store, "paraphrases", idle_timer=False, embeddings=embeddings) as memory:
        for session in layout([s for s, _ in asked], seed):
            memory.record_messages(session)
            memory.roll_now(idle=True)
        memory.wait()
        rates: dict[float, Rates] = {}
        for fusion in fusions:
            engine = RecallEngine(store, memory.service.analysis, fusion=fusion)
            tally: dict[str, list[int]] = {}
            for said, question in asked:
                hits = engine.recall("paraphrases", question, k=k, activate=False).hits
                found = [h.message.content for h in hits]
                row = tally.setdefault(language(said), [0, 0, 0])
                row[0] += bool(found) and found[0] == said
                row[1] += said in found
                row[2] += 1
            rates[fusion] = {lang: (a / n, b / n, n) for lang, (a, b, n) in sorted(tally.items())}
    return rates, time.perf_counter() - started


def embedders() -> list[tuple[str, EmbeddingSettings]]:
    chosen = [("static (default)", EmbeddingSettings())]
    try:  # PARTNER_MEMORY_EMBEDDINGS_MODEL names another model than the extra's
        model = os.environ.get("PARTNER_MEMORY_EMBEDDINGS_MODEL", "")
        chosen.append((f"encoder {model}".strip(), EmbeddingSettings.encoder(model)))
    except ConfigurationError as exc:
        print(f"encoder: not measured ({exc})")
    if os.environ.get("PARTNER_MEMORY_EMBEDDINGS_BASE_URL"):
        chosen.append(("endpoint", EmbeddingSettings.from_env({**os.environ})))
    chosen.append(("words only", EmbeddingSettings("off")))
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    asked = pairs()
    counts = {lang: sum(language(s) == lang for s, _ in asked) for lang in ("en", "zh")}
    print(
        f"{len(asked)} pairs ({counts['en']} English, {counts['zh']} Chinese) among"
        f" {FILLER} LoCoMo dev messages over {SESSIONS} rolled sessions\n"
    )
    print(f"| embedder | language | hit@1 | hit@{args.k} | ingest and ask, s |")
    print("| --- | --- | --- | --- | --- |")
    for name, embeddings in embedders():
        fusions = (FUSION,) if embeddings.kind == "off" else (FUSION, 0.0)
        measured, taken = score(embeddings, args.k, args.seed, fusions)
        for fusion, rates in measured.items():
            label = name if fusion == FUSION else f"{name}, fusion {fusion:g}"
            total = sum(n for _, _, n in rates.values())
            overall = sum(hit * n for _, hit, n in rates.values()) / total
            for lang, (first, within, n) in rates.items():
                print(f"| {label} | {lang} ({n}) | {100 * first:.0f} % | {100 * within:.0f} % | |")
            print(f"| {label} | all | | {100 * overall:.0f} % | {taken:.1f} |")


if __name__ == "__main__":
    main()
