"""A child process for the long-message tests: records or ingests what it is told, under a
memory limit, then prints its peak RSS (MiB) and what recall found.

Usage: python -m tests.long_message_worker DB (window|turn|ingest FILE) LIMIT_MIB
"""

from __future__ import annotations

import json
import resource
import sys

from partner_memory import MemoryService, RollingSettings

FILLER = "alpha beta gamma delta. "


def _long(chars: int, word: str) -> str:
    return f"{word} " + FILLER * (chars // len(FILLER))


def _peak_mib() -> int:
    """This process's peak resident memory since it started. Not `ru_maxrss`: Linux keeps
    that across exec, so it would report the test runner's peak (the forked image)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main(database: str, scenario: str, *rest: str) -> None:
    limit = int(rest[-1]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if scenario == "ingest":  # the CLI, in this process, so that its peak is measured
        from partner_memory.cli import main as cli

        sys.argv = ["partner-memory", "ingest", "--db", database, "-n", "ns", rest[0]]
        try:
            cli()
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise
    settings = RollingSettings(idle_check_interval_s=0)
    with MemoryService.open(database, settings=settings) as service:
        memory = service.memory("ns")
        if scenario == "window":  # one 100,000-character message among 60
            for i in range(30):
                text = _long(100_000, "zanzibar") if i == 7 else f"question {i} about kyoto"
                memory.record_turn(text, f"answer {i}")
        elif scenario == "turn":  # one 400 KB turn
            memory.record_turn(_long(400_000, "zanzibar"), "noted")
            memory.record_turn("and the kyoto trip?", "in april")
        memory.roll_now()
        memory.wait()
        found = {word: len(memory.recall(word).hits) for word in ("zanzibar", "kyoto")}
        failures = sum(c.failures for c in service.store.consumer_status("ns"))
    peak = _peak_mib()
    print(json.dumps({"peak_mib": peak, "found": found, "failures": failures}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
