"""Every sentence of a summary traced to the messages it came from (`MemoryCore.read_slice`):
an extractive summary's sentences are found in their messages, an LLM's made-up sentence
is flagged, and forgetting, copying and the Partner files keep it in step - on every
backend."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from partner_memory import Message, PartnerMemory
from partner_memory.interop.copy import copy_memory
from partner_memory.interop.partner_export import export_partner_state
from partner_memory.interop.partner_import import import_partner_state
from partner_memory.model import MemorySlice
from partner_memory.provenance import SUPPORTED, SummarySentence, provenance
from partner_memory.rolling import LLMSettings
from partner_memory.store import MemoryStore, open_store
from tests.conftest import ManualClock

MAY_8 = 1_683_536_400_000
SAID = [
    ("user", "[USER: Mei]:\n\nI adopted a kitten called Luna yesterday. She is tiny!"),
    ("assistant", "Lovely! What colour is she? Kittens need their first vaccines at 8 weeks."),
    ("user", "[USER: Mei]:\n\nBlack with white paws. We live on Juniper Street now."),
    ("assistant", "Juniper Street is close to the vet on Elm Road, which opens at 9am."),
    ("user", "[USER: Mei]:\n\nGreat, I will book the vet for Friday. Thanks!"),
]


def _told(memory: PartnerMemory) -> tuple[str, str]:
    memory.record_messages(
        [Message(role, text, timestamp=MAY_8 + 60_000 * i) for i, (role, text) in enumerate(SAID)]  # type: ignore[arg-type]
    )
    rolled = memory.roll_now()
    assert rolled is not None
    return rolled.memory_unit.id, rolled.memory_slice.id


def _claim(sentence: str) -> str:
    """The sentence as its message says it: without the speaker and the added date."""
    text = re.sub(r"^(I talked with [^:]+: )?([^:]{1,60}: )?", "", sentence)
    return re.sub(r" \([^()]+\)", "", text)


def test_each_sentence_of_an_extractive_summary_is_found_in_its_messages(
    store: MemoryStore,
) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        unit, slice_id = _told(memory)
        read = memory.core.read_slice(unit, slice_id)
        assert read.memory_slice.summarizer == "extractive"
        assert len(read.provenance) >= 4
        for sentence in read.provenance:
            assert (sentence.supported, sentence.held) == (True, 1.0), sentence
            assert len(sentence.positions) == 1
            (position,) = sentence.positions
            assert read.memory_slice.start_index <= position < read.memory_slice.end_index
            said = read.messages[position - read.memory_slice.start_index].text
            assert _claim(sentence.text) in said, (sentence.text, said)
        joined = " ".join(s.text for s in read.provenance)
        assert joined in read.memory_slice.summary.replace("\n", " ")
        document = read.to_dict()
        assert set(document) == {"namespace", "unit_id", "slice", "messages", "provenance"}
        assert document["provenance"][0] == {
            "text": read.provenance[0].text,
            "positions": list(read.provenance[0].positions),
            "supported": True,
            "held": 1.0,
        }


def test_a_made_up_sentence_of_an_llm_summary_is_flagged(
    store: MemoryStore, fake_llm: Any, manual_clock: ManualClock
) -> None:
    fake_llm.default = (
        "ok",
        "Mei adopted a kitten named Luna on 7 May 2023 and lives on Juniper Street."
        " The vet on Elm Road opens at 9am. Mei owns a sailing yacht called Seahorse."
        " Kittens need vaccines at 12 weeks.",
    )
    settings = LLMSettings(base_url=fake_llm.base_url, model="m", max_retries=0)
    with PartnerMemory(store, "agent", llm=settings, idle_timer=False) as memory:
        unit, slice_id = _told(memory)
        read = memory.core.read_slice(unit, slice_id)
        assert read.memory_slice.summarizer == "llm"
        flags = [(s.supported, s.positions) for s in read.provenance]
        assert flags == [(True, (0, 2)), (True, (3,)), (False, (0,)), (False, (1,))]
        assert read.provenance[2].held < SUPPORTED  # no message says it
        assert read.provenance[3].held >= SUPPORTED  # its words are there, its number is not


def test_after_a_forget_no_sentence_points_at_a_forgotten_message(store: MemoryStore) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        unit, slice_id = _told(memory)
        before = memory.core.read_slice(unit, slice_id)
        luna = before.messages[0].id
        assert any(0 in s.positions for s in before.provenance)
        memory.forget_messages([luna])
        after = memory.core.read_slice(unit, slice_id)
        assert "Luna" not in after.memory_slice.summary
        assert all(0 not in s.positions for s in after.provenance)
        assert all(s.supported for s in after.provenance)


def test_copies_and_the_partner_files_trace_the_same(
    store: MemoryStore, tmp_path: Path, manual_clock: ManualClock
) -> None:
    with PartnerMemory(store, "agent", idle_timer=False) as memory:
        unit, slice_id = _told(memory)
        traced = memory.core.read_slice(unit, slice_id).provenance
        export_partner_state(memory.core, tmp_path / "state")
    copied = open_store(str(tmp_path / "copy.db"))
    imported = open_store(str(tmp_path / "imported.db"))
    try:
        copy_memory(store, copied, namespaces=["agent"])
        import_partner_state(imported, tmp_path / "state", namespace="agent", clock=manual_clock)
        for other in (copied, imported):
            with PartnerMemory(other, "agent", idle_timer=False) as memory:
                assert memory.core.read_slice(unit, slice_id).provenance == traced
    finally:
        copied.close()
        imported.close()


def test_chinese_sentences_are_traced_by_their_characters() -> None:
    messages = [
        Message("user", "[USER: 小林]:\n\n我下周三要做胆囊手术，有点紧张。"),
        Message("assistant", "我会在周三早上提醒你禁食。"),
    ]
    summary = "我和小林的对话：小林：我下周三要做胆囊手术，有点紧张；我：我会在周三早上提醒你禁食。小林买了一匹马。"
    traced = provenance(MemorySlice("s", 4, 6, summary, MAY_8), messages)
    assert [(s.positions, s.supported) for s in traced] == [
        ((4,), True),
        ((5,), True),
        ((4,), False),
    ]
    assert traced[0] == SummarySentence("小林：我下周三要做胆囊手术，有点紧张；", (4,), True, 1.0)
