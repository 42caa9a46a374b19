"""What every adapter adds for a user's input (`NamespaceBinding.recalled`): recall's
best messages that the model is not shown already, each cut, and bounded in all."""

from __future__ import annotations

from partner_memory import Message
from partner_memory.integrations.binding import (
    RECALLED_CHARS,
    RECALLED_MESSAGE_CHARS,
    NamespaceBinding,
)
from partner_memory.service import MemoryService


def test_recall_for_an_input_leaves_out_what_is_shown_and_stays_bounded(store_url: str) -> None:
    with MemoryService.open(store_url) as service:
        binding = NamespaceBinding("user-7", memory=service)
        assert binding.recalled("anything", k=5) == ""  # nothing recorded yet
        long = [f"Kyoto plan {i}: " + "temple garden walk " * 100 for i in range(8)]
        binding.record([Message("user", text) for text in long])
        binding.record([Message("user", "My dentist is Dr Okafor.")])
        shown = binding.recalled_messages("Kyoto temple garden", k=8)
        assert len(shown) < 8  # the total bound stops it
        assert all(len(text) <= RECALLED_MESSAGE_CHARS for _, text in shown)
        assert all(text.endswith("…") for _, text in shown)
        assert sum(len(text) for _, text in shown) <= RECALLED_CHARS
        dentist = binding.recalled("Who is my dentist?", k=3)
        assert dentist.startswith("<recalled_messages>\n- ")
        assert "My dentist is Dr Okafor." in dentist
        seen = {m.id for m in binding.window()}
        assert "Okafor" not in binding.recalled("Who is my dentist?", k=3, seen=seen)
        assert binding.recalled("", k=3) == ""
