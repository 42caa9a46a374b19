"""The conversation trajectory (R9-R12): the window of messages the agent keeps.

The window lives in the store, not in this object: every process and thread
that opens the namespace records into, and rolls, the same window, in the
order the turns were recorded. Recording is one transaction and never waits
for a rolling's LLM call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

from partner_memory import markers
from partner_memory.clock import Clock
from partner_memory.model import (
    Message,
    WindowActivity,
    WindowMessage,
    check_messages,
    check_timestamp,
)
from partner_memory.requests import TurnInput, TurnOptions
from partner_memory.store.contract.base import AppendOptions, MemoryStore, WindowAppend


@dataclass(frozen=True, slots=True)
class Turn:
    """One recorded exchange: the user's input, the assistant's output, and whether it replied."""

    user: Message
    assistant: Message
    replied: bool


def kept_count(snapshot_size: int, retain_divisor: int | None) -> int:
    """R12: how many of the snapshot's newest messages a roll keeps (None: divisor infinite)."""
    if retain_divisor is None:
        return 0
    return snapshot_size // max(retain_divisor, 1)


class Trajectory:
    """The persisted, shared conversation window of one namespace."""

    def __init__(self, store: MemoryStore, namespace: str, *, clock: Clock) -> None:
        self._store = store
        self._namespace = namespace
        self._clock = clock

    def __len__(self) -> int:
        return self._store.trajectory_length(self._namespace)

    def snapshot(self) -> tuple[Message, ...]:
        return tuple(self._store.load_trajectory(self._namespace).messages)

    def window(self) -> list[WindowMessage]:
        """The window, oldest first, each message with the time of its interaction."""
        state = self._store.load_trajectory(self._namespace)
        return [
            WindowMessage(m, t) for m, t in zip(state.messages, state.interactions, strict=True)
        ]

    @property
    def last_interaction(self) -> int | None:
        """When the last turn was recorded (ms), by any process, or None before the first."""
        return self._store.window_activity(self._namespace).last_interaction

    def record_turn(
        self, user_input: str, assistant_output: str, **options: Unpack[TurnOptions]
    ) -> Turn:
        """R10-R11: drop structured prompts, then append the user input and the assistant output."""
        return self.record_turn_counted(user_input, assistant_output, **options)[0]

    def record_turn_counted(
        self, user_input: str, assistant_output: str, **options: Unpack[TurnOptions]
    ) -> tuple[Turn, WindowAppend]:
        """`record_turn`, also returning the window's length right after it and the
        interaction before it."""
        return self.record_input(TurnInput.of(user_input, assistant_output, **options))

    def record_input(self, turn: TurnInput) -> tuple[Turn, WindowAppend]:
        """`record_turn_counted` with the exchange as a value."""
        now = self._clock() if turn.timestamp is None else turn.timestamp
        assistant_content, replied = markers.assistant_text(turn.assistant_output)
        user = Message(
            role="user",
            content=markers.user_text(turn.source, turn.user_input),
            timestamp=now,
            metadata=dict(turn.metadata),
        )
        assistant = Message(role="assistant", content=assistant_content, timestamp=now)
        pair = [user, assistant]
        how = AppendOptions(now, structured_ids(pair), drop_structured=True, fresh_ids=True)
        appended = self._store.append_trajectory(self._namespace, pair, how)
        return Turn(user=user, assistant=assistant, replied=replied), appended

    def record(
        self, messages: Sequence[Message], *, interaction: int | None = None
    ) -> WindowAppend:
        """Append plain messages; `interaction` (ms) also moves the last-interaction time.

        Returns the window's length right after the append, and the interaction before.
        """
        batch = check_messages(messages)
        if interaction is not None:
            check_timestamp(interaction, "interaction")
        how = AppendOptions(interaction, structured_ids(batch))
        return self._store.append_trajectory(self._namespace, batch, how)


def dropped_ids(snapshot: Sequence[Message], retain_divisor: int | None) -> list[str]:
    """R12: the ids a roll removes from the window - all but the snapshot's newest share."""
    keep = kept_count(len(snapshot), retain_divisor)
    return [m.id for m in snapshot[: len(snapshot) - keep]]


def structured_ids(messages: Sequence[Message]) -> set[str]:
    """R10: the ids of structured prompts, which the next turn's recording drops."""
    return {m.id for m in messages if markers.is_structured_prompt(m.role, m.content)}


def idle_due(window: WindowActivity, now: int, idle_after_ms: int) -> bool:
    """R14: more than the idle time since the last interaction, not yet rolled for it."""
    last = window.last_interaction
    if last is None or last == window.idle_rolled_for or window.length <= 1:
        return False
    return now - last > idle_after_ms


def quiet_gap(interactions: Sequence[int | None], idle_after_ms: int) -> int | None:
    """Where a window's first quiet gap ends: the index of the first message after more
    than `idle_after_ms` of silence, or None. What lies before it is one memory
    session that has ended, whether or not any process ran through the quiet."""
    newest: int | None = None
    for i, at in enumerate(interactions):
        if at is None:
            continue
        if newest is not None and at - newest > idle_after_ms:
            return i
        newest = at if newest is None else max(newest, at)
    return None
