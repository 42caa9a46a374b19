"""The conversation trajectory (R9-R12): the window of messages the agent keeps.

It is written through to the store on every change, so a restarted agent
resumes with the same window, and guarded by one lock; readers take
snapshots. Writing never waits for a rolling: rolling only takes the lock
for the moment it trims the window.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from partner_memory import markers
from partner_memory.clock import Clock
from partner_memory.errors import InvalidInputError
from partner_memory.model import Message, check_messages, check_text
from partner_memory.store.base import MemoryStore


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
    """The persisted, thread-safe conversation window of one namespace."""

    def __init__(self, store: MemoryStore, namespace: str, *, clock: Clock) -> None:
        self._store = store
        self._namespace = namespace
        self._clock = clock
        self._lock = threading.Lock()
        state = store.load_trajectory(namespace)
        self._messages: list[Message] = []
        # kept beside the list so a turn costs the same however long the window is
        self._ids: set[str] = set()
        self._structured: set[str] = set()
        self._extend(state.messages)
        self._last_interaction = state.last_interaction

    def _extend(self, messages: Sequence[Message]) -> None:
        self._messages.extend(messages)
        self._ids.update(m.id for m in messages)
        self._structured.update(m.id for m in messages if markers.is_structured_prompt(m))

    def _drop(self, ids: set[str]) -> None:
        self._messages = [m for m in self._messages if m.id not in ids]
        self._ids -= ids
        self._structured -= ids

    def __len__(self) -> int:
        with self._lock:
            return len(self._messages)

    def snapshot(self) -> tuple[Message, ...]:
        with self._lock:
            return tuple(self._messages)

    @property
    def last_interaction(self) -> int | None:
        """When the last turn was recorded (ms), or None before the first."""
        with self._lock:
            return self._last_interaction

    def record_turn(
        self,
        user_input: str,
        assistant_output: str,
        *,
        source: str = "USER",
        timestamp: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Turn:
        """R10-R11: drop structured prompts, then append the user input and the assistant output."""
        check_text(user_input, "user_input")
        check_text(assistant_output, "assistant_output")
        check_text(source, "source")
        now = self._clock() if timestamp is None else timestamp
        assistant_content, replied = markers.assistant_text(assistant_output)
        user = Message(
            role="user",
            content=markers.user_text(source, user_input),
            timestamp=now,
            metadata=dict(metadata or {}),
        )
        assistant = Message(role="assistant", content=assistant_content, timestamp=now)
        with self._lock:
            if self._structured:
                structured = set(self._structured)
                self._store.remove_trajectory(self._namespace, sorted(structured))
                self._drop(structured)
            self._append_locked([user, assistant], interaction=now)
        return Turn(user=user, assistant=assistant, replied=replied)

    def record(self, messages: Sequence[Message], *, interaction: int | None = None) -> None:
        """Append plain messages; `interaction` (ms) also moves the last-interaction time."""
        batch = check_messages(messages)
        with self._lock:
            self._append_locked(batch, interaction=interaction)

    def _append_locked(self, messages: list[Message], *, interaction: int | None) -> None:
        ids = [m.id for m in messages]
        duplicate = next((i for i in ids if i in self._ids), None)
        if duplicate is None and len(set(ids)) != len(ids):
            duplicate = next(i for i in ids if ids.count(i) > 1)
        if duplicate is not None:
            raise InvalidInputError(f"message id {duplicate!r} is already in the trajectory")
        self._store.append_trajectory(self._namespace, messages, last_interaction=interaction)
        self._extend(messages)
        if interaction is not None:
            self._last_interaction = interaction

    def roll_with_snapshot(self, snapshot: Sequence[Message], retain_divisor: int | None) -> int:
        """R12: drop the snapshot's older messages, keeping its newest share and all later ones.

        Returns how many messages were dropped.
        """
        keep = kept_count(len(snapshot), retain_divisor)
        dropped = {m.id for m in snapshot[: len(snapshot) - keep]}
        with self._lock:
            ids = sorted(dropped & self._ids)
        if not ids:
            return 0
        # Deleted outside the lock, so turns keep being recorded meanwhile: only
        # this (single-flight) rolling ever drops these ids, and once stored in a
        # unit they are safe to lose from the window at any moment.
        self._store.remove_trajectory(self._namespace, ids)
        with self._lock:
            self._drop(set(ids))
        return len(ids)
