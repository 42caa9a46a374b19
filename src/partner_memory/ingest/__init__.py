"""Replaying transcripts through the pipeline: readers for JSON Lines and LoCoMo, and the driver."""

from partner_memory.ingest.replay import IngestReport, ReplayClock, ingest
from partner_memory.ingest.transcripts import Transcript, parse_transcript, read_transcript

__all__ = [
    "IngestReport",
    "ReplayClock",
    "Transcript",
    "ingest",
    "parse_transcript",
    "read_transcript",
]
