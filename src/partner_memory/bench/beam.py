"""Evidence recall on BEAM-format conversations, through the whole pipeline.

BEAM is built unlike LoCoMo: one user and an assistant, short user messages
between long replies, sessions weeks apart. Each conversation (`N/chat.json`,
a list of batches) is replayed into its own namespace, each batch a session at
its `time_anchor` (the only date the data gives; a batch without one follows the
previous by a week); then every question of `N/probing_questions.json` whose
evidence (`source_chat_ids`) is all in the chat is asked of `recall`, and scores
the share of its evidence among the top k, per memory ability. Beside it, in the
same run, plain BM25 over single messages with the same analysis.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from partner_memory.bench.scores import KS, EvidenceReport, Tally, paired, plain_bm25, timed
from partner_memory.errors import InvalidInputError
from partner_memory.ingest import ReplayClock, ingest
from partner_memory.ingest.transcripts import Transcript
from partner_memory.memory import PartnerMemory
from partner_memory.model import Message
from partner_memory.recall.analyze import terms
from partner_memory.recall.embed import EmbeddingSettings
from partner_memory.recall.searcher import Search
from partner_memory.store.contract.base import MemoryStore

#: The bookkeeping suffix BEAM puts after a message's text (" ->-> 1,1").
_SUFFIX = re.compile(r"\s*->->\s*[\d,\s]*$")
WEEK_MS = 7 * 86_400_000
#: Messages of one batch are this far apart.
TURN_GAP_MS = 60_000
#: The ability without evidence (what was never said).
ABSTENTION = "abstention"


def _anchor(text: Any) -> int | None:
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        day = datetime.strptime(text.strip(), "%B-%d-%Y").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(day.timestamp() * 1000)


def read_beam(directory: Path) -> Transcript:
    """`directory/chat.json` as a transcript: `metadata["beam_id"]` is each message's id."""
    path = directory / "chat.json"
    try:
        batches = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{path}: not a BEAM chat ({exc})") from None
    messages: list[Message] = []
    origins: list[str] = []
    clock: int | None = None
    for b, batch in enumerate(batches):
        turns = [m for turn in batch.get("turns", []) for m in turn]
        anchors = [_anchor(batch.get("time_anchor"))] + [
            _anchor(m.get("time_anchor")) for m in turns
        ]
        anchor = next((a for a in anchors if a is not None), None)
        if anchor is None:
            anchor = (clock or _anchor("January-01-2024") or 0) + WEEK_MS
        clock = max(anchor, clock + TURN_GAP_MS if clock is not None else anchor)
        for message in turns:
            content = _SUFFIX.sub("", str(message.get("content", ""))).strip()
            if not content or message.get("role") not in ("user", "assistant"):
                continue
            origins.append(f"{path.name}: batch {b}, id {message.get('id')}")
            messages.append(
                Message(
                    message["role"],
                    content,
                    id=f"{directory.name}-{message.get('id')}",
                    timestamp=clock,
                    metadata={"beam_id": str(message.get("id"))},
                )
            )
            clock += TURN_GAP_MS
    return Transcript(directory.name, "beam", messages, origins)


def _questions(directory: Path, known: set[str]) -> Iterable[tuple[str, str, set[str]]]:
    path = directory / "probing_questions.json"
    try:
        abilities = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{path}: not BEAM questions ({exc})") from None
    for ability, items in sorted(abilities.items()):
        if ability == ABSTENTION:
            continue
        for item in items:
            ids = item.get("source_chat_ids")
            flat = ids if isinstance(ids, list) else [i for v in (ids or {}).values() for i in v]
            evidence = {str(i) for i in flat}
            if evidence and evidence <= known:
                yield ability, str(item["question"]), evidence


def run_beam(
    store: MemoryStore,
    directory: Path,
    *,
    progress: Callable[[str], None] | None = None,
    embeddings: EmbeddingSettings | None = None,
) -> EvidenceReport:
    """Each `directory/N/` conversation in its own namespace; the report per ability."""
    chats = sorted(
        (d for d in directory.iterdir() if (d / "chat.json").is_file()),
        key=lambda d: (len(d.name), d.name),
    )
    if not chats:
        raise InvalidInputError(f"{directory}: no BEAM conversation (N/chat.json)")
    ours, baseline = Tally(), Tally()
    for chat in chats:
        if progress:
            progress(chat.name)
        transcript = read_beam(chat)
        plain = plain_bm25(transcript.messages)
        ids = [str(m.metadata["beam_id"]) for m in transcript.messages]
        clock = ReplayClock()
        namespace = f"beam-{chat.name}"
        with PartnerMemory(
            store, namespace, clock=clock, idle_timer=False, embeddings=embeddings
        ) as memory:
            ingest(memory, transcript, clock)
            memory.wait()
            for ability, question, evidence in _questions(chat, set(ids)):
                found, spent = timed(memory.recall, question, k=max(KS), activate=False)
                ranked = [str(h.message.metadata.get("beam_id")) for h in found.hits]
                ours.add(chat.name, ability, evidence, ranked, spent)
                hits, spent = timed(plain.search, Search(terms(question), k=max(KS)))
                baseline.add(
                    chat.name, ability, evidence, [ids[int(str(h.place[0]))] for h in hits], spent
                )
    return EvidenceReport(
        len(chats),
        len(ours.rows),
        [ours.score("recall"), baseline.score("BM25 messages")],
        paired(ours, baseline, ("recall", "BM25 messages")),
    )
