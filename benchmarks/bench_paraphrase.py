"""Paraphrases: questions that share no content word with what was remembered.

`data/paraphrases.json` holds pairs of a remembered sentence and a question
about it whose analysed terms do not overlap (checked by the tests). All the
sentences are recorded into one namespace, each between two replies, so each
question has the others as distractors; a question scores when its sentence
is among the top k. Measured with the sentences stored (rolled) and still in
the window, with the default (words and meaning) and by words alone.

Usage: python benchmarks/bench_paraphrase.py [--k 5]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from partner_memory import Message, PartnerMemory, open_store
from partner_memory.recall.embed import EmbeddingSettings

PAIRS = Path(__file__).resolve().parent / "data" / "paraphrases.json"


def pairs() -> list[tuple[str, str]]:
    return [(said, asked) for said, asked in json.loads(PAIRS.read_text("utf-8"))]


def hit_rate(k: int, *, rolled: bool, embeddings: EmbeddingSettings | None) -> tuple[float, float]:
    """Hit rate at 1 and at `k`."""
    asked = pairs()
    with PartnerMemory(
        open_store("memory://"), "paraphrases", idle_timer=False, embeddings=embeddings
    ) as memory:
        messages = []
        for said, _ in asked:
            messages += [Message("user", said), Message("assistant", "Thanks for telling me.")]
        memory.record_messages(messages)
        if rolled:
            memory.roll_now()
            memory.wait()
        first = within = 0
        for said, question in asked:
            found = [h.message.content for h in memory.recall(question, k=k, activate=False).hits]
            first += bool(found) and said in found[0]
            within += any(said in text for text in found)
    return first / len(asked), within / len(asked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args()
    print(f"{len(pairs())} pairs\n")
    print(f"| recall | where | hit@1 | hit@{args.k} |")
    print("| --- | --- | --- | --- |")
    for name, embeddings in (("words and meaning", None), ("words only", EmbeddingSettings("off"))):
        for rolled in (True, False):
            at_1, at_k = hit_rate(args.k, rolled=rolled, embeddings=embeddings)
            where = "stored" if rolled else "window"
            print(f"| {name} | {where} | {100 * at_1:.1f} % | {100 * at_k:.1f} % |")


if __name__ == "__main__":
    main()
