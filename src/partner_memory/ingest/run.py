"""Replay transcripts into one namespace of a store: the library call behind `ingest`
and `import`, so both replay exactly alike (one clock, one bulk analysis job)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from partner_memory.config import Settings
from partner_memory.ingest.replay import IngestReport, ReplayClock, ingest
from partner_memory.ingest.transcripts import Transcript
from partner_memory.memory import PartnerMemory
from partner_memory.store.contract.base import MemoryStore

#: Called as each transcript starts, with its name and length; what it returns is
#: called with each count of messages done (a progress bar's task).
Progress = Callable[[str, int], Callable[[int], None]]


def ingest_transcripts(
    store: MemoryStore,
    namespace: str,
    transcripts: Sequence[Transcript],
    *,
    flush: bool = True,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> list[IngestReport]:
    """Record `transcripts` in order into `namespace` (made if new) with their own times;
    `flush` rolls what is left at the end. Safe to run again: stored ids are skipped."""
    options = (settings or Settings.from_env()).runtime_options()
    clock = ReplayClock()
    memory = PartnerMemory(store, namespace, clock=clock, idle_timer=False, **options)
    reports = []
    # one bulk job, so files that together are worth the analysis worker start it
    job = memory.service.analysis.bulk(sum(len(t.messages) for t in transcripts))
    try:
        with job:
            for transcript in transcripts:
                advance = progress(transcript.name, len(transcript.messages)) if progress else None
                reports.append(ingest(memory, transcript, clock, flush=flush, progress=advance))
    finally:
        memory.close()
    return reports
