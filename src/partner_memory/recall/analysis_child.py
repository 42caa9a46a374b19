"""The analysis worker's own side (`analysis_worker` starts it): answer each pickled
batch of messages on stdin with its recall rows on stdout, until end of input."""

from __future__ import annotations

import logging
import os
import pickle
import sys
from typing import IO

from partner_memory.recall.analysis_worker import WorkerSpec, received
from partner_memory.recall.analyze import RecallAnalysis
from partner_memory.recall.embed import StaticEmbedder


def _analysis(spec: WorkerSpec) -> RecallAnalysis:
    if spec[0] == "static":
        analysis = RecallAnalysis(StaticEmbedder(int(spec[1])), worker=False)
    elif spec[0] == "none":
        analysis = RecallAnalysis(None, worker=False)
    else:
        raise ValueError(f"unknown analysis worker spec {spec!r}")
    analysis.warm()
    return analysis


def main() -> None:
    # only pickles go to the parent: whatever a library prints goes to stderr
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    questions = sys.stdin.buffer
    logging.disable(logging.WARNING)  # what it would warn of, the parent says itself
    try:
        analysis = _analysis(pickle.load(questions))
        answer: tuple[object, ...] = ("ok", None)
    except EOFError:
        return
    except Exception as exc:  # the parent makes the rows itself
        _answer(answers, ("failed", f"{type(exc).__name__}: {exc}"))
        return
    _answer(answers, answer)
    while True:
        try:
            ticket, batch = pickle.load(questions)
        except EOFError:
            return
        try:
            answer = (ticket, "ok", analysis.rows(received(batch)))
        except Exception as exc:
            answer = (ticket, "failed", f"{type(exc).__name__}: {exc}")
        _answer(answers, answer)


def _answer(answers: IO[bytes], answer: tuple[object, ...]) -> None:
    pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
    answers.flush()


if __name__ == "__main__":
    main()
