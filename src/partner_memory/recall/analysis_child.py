"""The analysis worker's own side (`analysis_worker` starts it): answer each pickled
request on stdin (a batch's recall rows, or its offline summary) on stdout, until end
of input."""

from __future__ import annotations

import logging
import os
import pickle
import sys
from typing import IO

from partner_memory.recall.analysis_worker import Request, WorkerSpec, received
from partner_memory.recall.analyze import RecallAnalysis
from partner_memory.recall.embed import StaticEmbedder
from partner_memory.recall.encoder import shared_encoder
from partner_memory.rolling.summarize import ExtractiveSummarizer, load_segmenter


def _analysis(spec: WorkerSpec) -> RecallAnalysis:
    if spec[0] == "static":
        analysis = RecallAnalysis(StaticEmbedder(int(spec[1])), worker=False)
    elif spec[0] == "encoder":
        analysis = RecallAnalysis(shared_encoder(str(spec[1])), worker=False)
    elif spec[0] == "none":
        analysis = RecallAnalysis(None, worker=False)
    else:
        raise ValueError(f"unknown analysis worker spec {spec!r}")
    analysis.warm()
    # jieba's dictionary (~0.1 s) is loaded before the worker says it is ready: loaded by
    # its first summary instead, it held up that rolling, or the rows queued behind it
    load_segmenter()
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
            ticket, request = pickle.load(questions)
        except EOFError:
            return
        try:
            answer = (ticket, "ok", _answered(analysis, request))
        except Exception as exc:
            answer = (ticket, "failed", f"{type(exc).__name__}: {exc}")
        _answer(answers, answer)


def _answered(analysis: RecallAnalysis, request: Request) -> object:
    if request[0] == "rows":
        return analysis.rows(received(request[1]))
    if request[0] == "summary":
        return ExtractiveSummarizer(int(request[1])).summarize_here(received(request[2]))
    raise ValueError(f"unknown request {request[0]!r}")


def _answer(answers: IO[bytes], answer: tuple[object, ...]) -> None:
    try:
        pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
        answers.flush()
    except BrokenPipeError:  # the parent is gone (it exited, or was killed): so is its work
        os._exit(0)


if __name__ == "__main__":
    main()
