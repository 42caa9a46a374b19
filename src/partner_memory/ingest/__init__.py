"""Replaying transcripts through the pipeline: readers for JSON Lines and LoCoMo, and the driver."""

from partner_memory.ingest.replay import IngestReport, ReplayClock, ingest
from partner_memory.ingest.run import Progress, ingest_transcripts
from partner_memory.ingest.transcripts import Transcript, parse_transcript, read_transcript

__all__ = [
    "IngestReport",
    "Progress",
    "ReplayClock",
    "Transcript",
    "ingest",
    "ingest_transcripts",
    "parse_transcript",
    "read_transcript",
]
