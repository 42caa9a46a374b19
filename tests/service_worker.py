"""A child process for the shared-memory tests: records turns on a wall-clock schedule.

Conversations happen in phases separated by quiet gaps longer than the idle
time, so the idle trigger (run by whichever process's scheduler sees it
first) must split them into units. The worker exits after a number of turns
(the test restarts it) and appends the ids of every acknowledged message,
with its sequence number, to its ack file.
"""

from __future__ import annotations

import json
import sys
import time

from partner_memory import MemoryService, RollingSettings, open_store


def main(plan_json: str) -> None:
    plan = json.loads(plan_json)
    store = open_store(plan["db"])
    settings = RollingSettings(
        max_messages=plan["max_messages"],
        idle_after_ms=plan["idle_after_ms"],
        idle_check_interval_s=plan["idle_check_s"],
        lease_ttl_s=plan["lease_ttl_s"],
    )
    service = MemoryService(store, settings=settings, owns_store=True)
    memory = service.memory(plan["namespace"])
    worker, seq = plan["worker"], plan["first_seq"]
    start, phase_s, gap_s = plan["start"], plan["phase_s"], plan["gap_s"]
    end = start + plan["phases"] * (phase_s + gap_s)
    turns = 0
    with open(plan["acks"], "a", encoding="utf-8") as acks:
        while turns < plan["turns_per_life"] + 7 * worker:
            now = time.time()
            if now >= end:
                break
            offset = (now - start) % (phase_s + gap_s)
            if offset >= phase_s:  # quiet: wait for the next phase
                time.sleep(phase_s + gap_s - offset)
                continue
            turn = memory.record_turn(f"w{worker} {seq}", f"w{worker} {seq} ok")
            acks.write(f"{turn.user.id} {turn.assistant.id} {seq}\n")
            acks.flush()
            seq += 1
            turns += 1
            time.sleep(plan["pause_s"])
    service.close()


if __name__ == "__main__":
    main(sys.argv[1])
