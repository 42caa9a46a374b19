"""What an embedder costs as a user runs it: the static default beside the encoder.

1. Live turns: `record_turn` with LoCoMo dev text into a SQLite file, rolling
   when the window is full, for each embedder: the caller's turn p50/p99 (the
   index is fed behind it), then how long until every turn is indexed (the lag), the
   messages indexed per second, CPU seconds per message, and the process's peak
   resident memory with the model loaded.
2. Recall p50 at 100,000 messages by meaning: the index itself, each message one
   of 400 LoCoMo turns with its vector moved by noise (embedding 100,000 texts
   with the encoder would take an hour), the question embedded each time.

Each embedder runs in its own process, one after the other (`--only` runs one).

Usage: python benchmarks/bench_encoder.py [--turns 600] [--rows 100000]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = ("static", "encoder")


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def texts(count: int) -> list[str]:
    sys.path.insert(0, str(HERE))
    from bench_paraphrase import filler

    return filler(count)


def live(kind: str, turns: int) -> dict[str, float]:
    from partner_memory import PartnerMemory, open_store
    from partner_memory.recall.embed import EmbeddingSettings

    settings = EmbeddingSettings.encoder() if kind == "encoder" else EmbeddingSettings()
    said = texts(2 * turns)
    with tempfile.TemporaryDirectory() as scratch:
        store = open_store(str(Path(scratch) / "bench.db"))
        with PartnerMemory(store, "bench", idle_timer=False, embeddings=settings) as memory:
            memory.service.analysis.warm()
            cpu = time.process_time()
            began = time.perf_counter()
            spent = []
            for i in range(turns):
                start = time.perf_counter()
                memory.record_turn(said[2 * i], said[2 * i + 1])
                spent.append((time.perf_counter() - start) * 1000)
            recorded = time.perf_counter()
            memory.roll_now()
            memory.wait()
            done = time.perf_counter()
            cpu = time.process_time() - cpu
            asked = []
            for question in said[:50]:
                start = time.perf_counter()
                memory.recall(question[:60], k=10, activate=False)
                asked.append((time.perf_counter() - start) * 1000)
    return {
        "turn_p50_ms": statistics.median(spent),
        "turn_p99_ms": pct(spent, 0.99),
        "lag_s": done - recorded,
        "indexed_per_s": 2 * turns / (done - began),
        "cpu_ms_per_message": 1000 * cpu / (2 * turns),
        "recall_p50_ms": statistics.median(asked),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def at_scale(kind: str, rows: int) -> dict[str, float]:
    import numpy as np

    from partner_memory.recall.analyze import terms
    from partner_memory.recall.embed import EmbeddingSettings, pack
    from partner_memory.recall.searcher import Doc, Search
    from partner_memory.recall.tantivy_index import TantivyIndex

    settings = EmbeddingSettings.encoder() if kind == "encoder" else EmbeddingSettings()
    embedder = settings.embedder()
    assert embedder is not None
    said = texts(400)
    vectors = [
        np.frombuffer(v, dtype=np.int8).astype(np.float32) for v in pack(embedder.embed(said))
    ]
    rng = np.random.default_rng(1)
    scale = float(np.abs(vectors[0]).mean())
    index = TantivyIndex(None)
    for start in range(0, rows, 25_000):
        docs = []
        for i in range(start, min(rows, start + 25_000)):
            near = vectors[i % 400] + rng.normal(0, scale, len(vectors[0]))
            packed = np.clip(near.round(), -127, 127).astype(np.int8).tobytes()
            docs.append(Doc("u", i, terms(said[i % 400]), vector=packed))
        index.add(docs)
    asked = []
    for question in texts(450)[400:]:
        start = time.perf_counter()
        vector = embedder.embed([question])[0]
        index.search(Search(terms(question), k=10, vector=vector))
        asked.append((time.perf_counter() - start) * 1000)
    return {"recall_p50_ms_at_scale": statistics.median(asked), "rows": float(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--only", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        figures = live(args.only, args.turns) | at_scale(args.only, args.rows)
        print(json.dumps(figures))
        return
    results = {}
    for kind in KINDS:
        done = subprocess.run(
            [
                sys.executable,
                __file__,
                "--only",
                kind,
                "--turns",
                str(args.turns),
                "--rows",
                str(args.rows),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        results[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    names = list(results["static"])
    print("| | " + " | ".join(KINDS) + " |")
    print("| --- |" + " --- |" * len(KINDS))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{results[k][name]:.2f}" for k in KINDS) + " |")


if __name__ == "__main__":
    main()
