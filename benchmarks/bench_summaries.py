"""Offline summaries against LoCoMo's reference session summaries: ROUGE and answer coverage.

Each session of each LoCoMo dev conversation is summarised as one rolling would
summarise it (`ExtractiveSummarizer`, the offline default), and beside it, cut to the
same length so that length alone earns nothing: LEAD (the session's first sentences)
and TextRank (sentences ranked by PageRank over their word overlap). Printed:

- ROUGE-1/2/L F1 against the session's reference summary (`rouge-score`, stemmed);
- answer coverage: for each single-hop and temporal question whose evidence lies in
  one session, whether every content word of its answer is in that session's summary;
- the summaries' mean length and the time per session.

Below them, ours minus each baseline with a paired 95 % interval (per session for
ROUGE-1, per question for coverage). With `--folds`, each figure per conversation:
the summariser's constants (`rolling/summarize.py`) were chosen leaving each
conversation out in turn (a grid over FACT_WEIGHT, QUESTION_WEIGHT and REPEATED, best
mean ROUGE-1 + coverage on the other four), and all five folds chose the same.

`--beam DIR` scores BEAM instead (built differently: one user, long assistant
replies, no reference summaries): answer coverage only, each batch (a session)
summarised whole, for the information-extraction, knowledge-update and temporal
questions whose evidence lies in one batch, the rubric's "should state" parts as the
answer.

Usage: python benchmarks/bench_summaries.py [--folds] [--dir DIR] [--beam DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from partner_memory import Message
from partner_memory.ingest import read_transcript
from partner_memory.rolling.summarize import ExtractiveSummarizer
from partner_memory.sentences import sentences_of

HERE = Path(__file__).resolve().parent
LOCOMO = Path(
    os.environ.get(
        "PARTNER_MEMORY_LOCOMO_DIR", HERE.parent.parent / "shared" / "data" / "locomo-dev"
    )
)
#: LoCoMo's question categories scored for coverage: temporal and single-hop.
COVERED = {2, 4}
_WORDS = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the and or of to in on at for with from by as is are was were be been it its this"
    " that he she they her his their them i you we my your our".split()
)

Summarise = Callable[[Sequence[Message], int], str]


def sessions(path: Path) -> dict[int, list[Message]]:
    """A conversation's messages by session, as `ingest` reads them."""
    by: dict[int, list[Message]] = defaultdict(list)
    for message in read_transcript(path, "locomo").messages:
        by[int(message.metadata["session"])].append(message)
    return dict(by)


def _said(messages: Sequence[Message]) -> list[str]:
    """Every sentence, with who said it, in order."""
    return [
        f"{m.metadata.get('speaker', m.role)}: {sentence}"
        for m in messages
        for sentence in sentences_of(m.text)
    ]


def _cut(chosen: Sequence[str], chars: int) -> str:
    out: list[str] = []
    for sentence in chosen:
        if out and sum(len(s) + 1 for s in out) + len(sentence) > chars:
            break
        out.append(sentence)
    return " ".join(out)


def lead(messages: Sequence[Message], chars: int) -> str:
    return _cut(_said(messages), chars)


def textrank(messages: Sequence[Message], chars: int) -> str:
    """Sentences ranked by PageRank over their word overlap (Mihalcea and Tarau, 2004),
    taken best first to `chars`, in the order said."""
    said = _said(messages)
    words = [set(_WORDS.findall(s.lower())) - _STOP for s in said]
    n = len(said)
    if not n:
        return ""
    weight = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            shared = len(words[i] & words[j])
            if shared and len(words[i]) > 1 and len(words[j]) > 1:
                weight[i, j] = weight[j, i] = shared / (
                    math.log(len(words[i])) + math.log(len(words[j]))
                )
    out = weight.sum(axis=1)
    out[out == 0] = 1.0
    rank = np.full(n, 1.0 / n)
    for _ in range(50):
        rank = 0.15 / n + 0.85 * (weight / out[:, None]).T @ rank
    taken: list[int] = []
    used = 0
    for i in np.argsort(-rank, kind="stable").tolist():
        if used and used + len(said[i]) + 1 > chars:
            continue
        taken.append(i)
        used += len(said[i]) + 1
    return " ".join(said[i] for i in sorted(taken))


def summarised(messages: Sequence[Message]) -> tuple[dict[str, str], float]:
    """Our summary and the baselines' at its length, by system, and our seconds."""
    started = time.perf_counter()
    summary = ExtractiveSummarizer().summarize_here(messages)
    took = time.perf_counter() - started
    systems: dict[str, Summarise] = {"LEAD": lead, "TextRank": textrank}
    return {"ours": summary} | {n: f(messages, len(summary)) for n, f in systems.items()}, took


def paired(ours: Sequence[float], other: Sequence[float]) -> tuple[float, float, float]:
    """Mean of `ours` - `other` (the same items) and its 95 % interval (normal)."""
    differences = np.array(ours) - np.array(other)
    half = 1.96 * float(differences.std(ddof=1)) / math.sqrt(len(differences))
    mean = float(differences.mean())
    return mean, mean - half, mean + half


def content_words(text: str) -> set[str]:
    return set(_WORDS.findall(text.lower())) - _STOP


def questions(path: Path) -> list[tuple[int, str]]:
    """(session, answer) of each covered question whose evidence lies in one session."""
    import json

    found = []
    for item in json.loads(path.read_text("utf-8"))["qa"]:
        if item.get("category") not in COVERED or "answer" not in item:
            continue
        held = {str(e).split(":")[0].strip() for ev in item["evidence"] for e in str(ev).split(";")}
        held.discard("")
        if len(held) == 1:
            (session,) = held
            if session.startswith("D") and session[1:].isdigit():
                found.append((int(session[1:]), str(item["answer"])))
    return found


def run(directory: Path, folds: bool) -> None:
    import json

    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    rouge: dict[str, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
    covered: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    lengths: list[int] = []
    spent = 0.0
    for path in sorted(directory.glob("conv-*.json")):
        document = json.loads(path.read_text("utf-8"))
        made: dict[int, dict[str, str]] = {}
        for session, messages in sorted(sessions(path).items()):
            made[session], took = summarised(messages)
            spent += took
            lengths.append(len(made[session]["ours"]))
            reference = document.get(f"session_{session}_summary")
            if reference:
                for name, text in made[session].items():
                    s = scorer.score(reference, text)
                    rouge[name][path.stem].append([s[k].fmeasure for k in s])
        for session, answer in questions(path):
            wanted = content_words(answer)
            if session in made and wanted:
                for name, text in made[session].items():
                    covered[name][path.stem].append(float(wanted <= content_words(text)))
    names = ["ours", "LEAD", "TextRank"]
    print(f"sessions: {len(lengths)}, our summary {np.mean(lengths):.0f} characters on average")
    print(f"(LEAD and TextRank cut to the same length), {1000 * spent / len(lengths):.1f} ms each")
    print("\n| system | ROUGE-1 | ROUGE-2 | ROUGE-L | answer coverage |")
    print("| --- | --- | --- | --- | --- |")
    for name in names:
        scores = np.array([r for rows in rouge[name].values() for r in rows]) * 100
        cover = np.mean([c for rows in covered[name].values() for c in rows]) * 100
        r1, r2, rl = scores.mean(axis=0)
        print(f"| {name} | {r1:.1f} | {r2:.1f} | {rl:.1f} | {cover:.1f} |")
    n_cover = sum(len(rows) for rows in covered["ours"].values())
    print(f"\nanswer coverage over {n_cover} questions")
    print("\n| ours minus | ROUGE-1 (per session) | answer coverage (per question) |")
    print("| --- | --- | --- |")
    for name in names[1:]:
        cells = []
        for table, pick in ((rouge, lambda r: r[0]), (covered, lambda c: c)):
            a = [100 * pick(r) for rows in table["ours"].values() for r in rows]
            b = [100 * pick(r) for rows in table[name].values() for r in rows]
            mean, low, high = paired(a, b)
            cells.append(f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]")
        print(f"| {name} | " + " | ".join(cells) + " |")
    if folds:
        print("\n| conversation | " + " | ".join(f"{n} R-1 / cover" for n in names) + " |")
        print("| --- |" + " --- |" * len(names))
        for conversation in sorted(rouge["ours"]):
            cells = [
                f"{100 * np.mean([r[0] for r in rouge[n][conversation]]):.1f} / "
                f"{100 * np.mean(covered[n][conversation] or [0.0]):.1f}"
                for n in names
            ]
            print(f"| {conversation} | " + " | ".join(cells) + " |")


#: BEAM's abilities whose answer a session's summary can hold.
BEAM_COVERED = ("information_extraction", "knowledge_update", "temporal_reasoning")
_STATED = re.compile(r"should (?:state|mention|include)[^:]*:\s*(.+)", re.IGNORECASE)


def beam_questions(directory: Path, batch_of: dict[str, int]) -> list[tuple[int, str]]:
    """(batch, what the answer must state) of each covered question whose evidence lies
    in one batch."""
    import json

    found = []
    abilities = json.loads((directory / "probing_questions.json").read_text("utf-8"))
    for ability in BEAM_COVERED:
        for item in abilities.get(ability, []):
            ids = item.get("source_chat_ids")
            flat = ids if isinstance(ids, list) else [i for v in (ids or {}).values() for i in v]
            batches = {batch_of.get(str(i)) for i in flat}
            stated = [m.group(1) for r in item.get("rubric", []) if (m := _STATED.search(r))]
            if len(batches) == 1 and None not in batches and stated:
                found.append((batches.pop() or 0, " ".join(stated)))
    return found


def run_beam(directory: Path) -> None:
    from partner_memory.bench.beam import read_beam

    covered: dict[str, list[float]] = defaultdict(list)
    lengths: list[int] = []
    spent = 0.0
    chats = sorted(p.parent for p in directory.glob("*/chat.json"))
    for chat in chats:
        transcript = read_beam(chat)
        batch_of: dict[str, int] = {}
        by: dict[int, list[Message]] = defaultdict(list)
        for message, origin in zip(transcript.messages, transcript.origins, strict=True):
            batch = int(origin.split("batch ")[1].split(",")[0])
            batch_of[str(message.metadata["beam_id"])] = batch
            by[batch].append(message)
        made: dict[int, dict[str, str]] = {}
        for batch, messages in sorted(by.items()):
            made[batch], took = summarised(messages)
            spent += took
            lengths.append(len(made[batch]["ours"]))
        for batch, answer in beam_questions(chat, batch_of):
            wanted = content_words(answer)
            if wanted:
                for name, text in made[batch].items():
                    covered[name].append(float(wanted <= content_words(text)))
    print(f"BEAM: {len(chats)} chats, {len(lengths)} sessions, our summary")
    print(
        f"{np.mean(lengths):.0f} characters on average, {1000 * spent / len(lengths):.1f} ms each"
    )
    print(f"answer coverage over {len(covered['ours'])} questions\n")
    print("| system | answer coverage | ours minus it |")
    print("| --- | --- | --- |")
    for name in ("ours", "LEAD", "TextRank"):
        cover = 100 * np.mean(covered[name])
        if name == "ours":
            print(f"| {name} | {cover:.1f} | |")
            continue
        mean, low, high = paired(
            [100 * c for c in covered["ours"]], [100 * c for c in covered[name]]
        )
        print(f"| {name} | {cover:.1f} | {mean:+.1f} [{low:+.1f}, {high:+.1f}] |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=LOCOMO)
    parser.add_argument("--folds", action="store_true")
    parser.add_argument("--beam", type=Path, default=None)
    args = parser.parse_args()
    if args.beam is not None:
        run_beam(args.beam)
    else:
        run(args.dir, args.folds)


if __name__ == "__main__":
    main()
