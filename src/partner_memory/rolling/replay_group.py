"""A replay's rollings, planned in memory under one lease and written in groups.

Live, every recording and every rolling is its own transaction, and the
rolling waits for a background thread: right for an agent that speaks every
few seconds, a waste for a transcript replayed at thousands of messages a
second. A group takes the namespace's rolling lease and its window once,
then applies the same triggers (R13, R14) and the same rolling (`plan`) to
a copy of the window in memory, and writes what recording the messages one
by one would have written - window rows, slices, log entries, trimmed
window, new sessions - in one transaction (`commit_replay`).

A crash loses the group in flight and nothing else: what is stored is then
what live recording leaves after some rolling, from which a replay resumes.
A group is committed once it holds `RollingSettings.replay_group_messages`
messages, or once it is `replay_group_s` old (with an LLM summariser that is
after every rolling, so paid summaries are kept), and the lease is given
back between groups.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Protocol

from partner_memory.model import Message, WindowActivity, check_messages, newest
from partner_memory.rolling.after_rolling import RollingResult
from partner_memory.rolling.lease import LeaseKeeper
from partner_memory.rolling.moment import Moment
from partner_memory.rolling.settings import RollingSettings
from partner_memory.store.contract.base import (
    CommittedRolling,
    MemoryStore,
    ReplayStep,
    RollingCommit,
)
from partner_memory.trajectory import idle_due, structured_ids


class RollingPlanner(Protocol):
    """The rolling a group applies to its window copy: `DialogRolling`'s own rules."""

    @property
    def namespace(self) -> str: ...

    @property
    def settings(self) -> RollingSettings: ...

    def moment(
        self,
        snapshot: tuple[Message, ...],
        interactions: tuple[int | None, ...],
        *,
        idle: bool,
    ) -> Moment: ...

    def due(self, activity: WindowActivity, *, idle: bool) -> bool: ...

    def plan(
        self, moment: Moment, stored: Collection[str] | None = None
    ) -> RollingCommit | None: ...

    def finish(
        self, commit: RollingCommit, committed: CommittedRolling
    ) -> RollingResult | None: ...


class ReplayGroup:
    """Use as a context manager (`DialogRolling.replay_group`, which keeps the namespace's
    other rollings in this process out meanwhile); leaving it commits the last group."""

    def __init__(self, rolling: RollingPlanner, store: MemoryStore, leases: LeaseKeeper) -> None:
        self._rolling = rolling
        self._store = store
        self._leases = leases
        self._namespace = rolling.namespace
        self._settings = rolling.settings
        #: The window as the database will hold it, with each row's interaction;
        #: None while the lease is not held.
        self._window: list[tuple[Message, int | None]] | None = None
        self._rolled_for: int | None = None
        #: Ids of the window's messages already stored in a unit.
        self._stored: set[str] = set()
        self._steps: list[ReplayStep] = []
        self._messages = 0
        self._opened_at = 0.0
        self.results: list[RollingResult] = []

    def __enter__(self) -> ReplayGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.commit()
        finally:
            if self._window is not None:  # abandoned: nothing of the group is written
                self._window = None
                self._steps.clear()
                self._leases.release(self._namespace)

    # -- what a replay does ----------------------------------------------------------

    @property
    def window_length(self) -> int:
        return len(self._open())

    def record(
        self,
        messages: Sequence[Message],
        *,
        interaction: int,
        interactions: Sequence[int] = (),
    ) -> int:
        """Record `messages` as one interaction (or, given `interactions`, each at its own
        time, as live recording them one by one would); the count trigger (R13) as live.
        Returns the window's length after it (and after the rolling it triggered)."""
        window = self._open()
        batch = check_messages(messages)
        times = list(interactions) or [interaction] * len(batch)
        structured = frozenset(structured_ids(batch))
        self._steps.append(ReplayStep(batch, interaction, structured, interactions=times))
        window += zip(batch, times, strict=True)
        self._messages += len(batch)
        if len(window) >= self._settings.max_messages:
            self._roll(idle=False)
        self._commit_if_due()
        return len(self._open())

    def check_idle(self, now: int) -> bool:
        """The idle trigger (R14) as the scheduler would have fired it at `now`."""
        window = self._open()
        activity = WindowActivity(len(window), self._last_interaction(), self._rolled_for)
        if not idle_due(activity, now, self._settings.idle_after_ms):
            return False
        self._roll(idle=True)
        self._commit_if_due()
        return True

    def roll(self, *, idle: bool) -> None:
        """Roll what the window holds now (`roll_now`), one conversation at a time."""
        self._open()
        self._roll(idle=idle, force=True)

    def commit(self) -> None:
        """Write the group in one transaction and give the lease back."""
        if self._window is None:
            return
        steps, self._steps = self._steps, []
        self._window = None
        try:
            committed = self._store.commit_replay(self._namespace, self._leases.holder, steps)
        except BaseException:
            self._leases.release(self._namespace)
            raise
        self._leases.committed(self._namespace)
        rollings = [step.rolling for step in steps if step.rolling is not None]
        for commit, done in zip(rollings, committed, strict=True):
            result = self._rolling.finish(commit, done)
            if result is not None:
                self.results.append(result)

    # -- inside ----------------------------------------------------------------------

    def _open(self) -> list[tuple[Message, int | None]]:
        """The window, taking the lease and reading the window first if not held."""
        if self._window is not None:
            return self._window
        state = self._leases.acquire(self._namespace)
        self._window = list(zip(state.messages, state.interactions, strict=True))
        self._rolled_for = state.idle_rolled_for
        ids = [m.id for m in state.messages]
        self._stored = self._store.stored_message_ids(self._namespace, ids) if ids else set()
        self._messages = 0
        self._opened_at = time.monotonic()
        return self._window

    def _last_interaction(self) -> int | None:
        return newest(t for _, t in self._open())

    def _roll(self, *, idle: bool, force: bool = False) -> None:
        """One rolling as live would roll it - up to the window's first quiet gap, then
        the next conversation if its own trigger holds (or, with `force`, anyway)."""
        while True:
            window = self._open()
            moment = self._rolling.moment(
                tuple(m for m, _ in window), tuple(t for _, t in window), idle=idle
            )
            self._apply(moment)
            if not moment.ended:
                return
            if force:
                continue
            activity = WindowActivity(len(self._open()), self._last_interaction(), self._rolled_for)
            if not self._rolling.due(activity, idle=idle):
                return

    def _apply(self, moment: Moment) -> None:
        window = self._open()
        commit = self._rolling.plan(moment, self._stored)
        if commit is None:
            return
        last = self._steps[-1] if self._steps else None
        if last is not None and last.rolling is None:
            self._steps[-1] = ReplayStep(
                last.messages, last.interaction, last.structured, commit, last.interactions
            )
        else:
            self._steps.append(ReplayStep((), None, rolling=commit))
        self._stored.update(m.id for m in commit.messages)
        dropped = set(commit.drop)
        window[:] = [(m, t) for m, t in window if m.id not in dropped]
        if commit.idle and commit.last_interaction is not None:
            self._rolled_for = commit.last_interaction

    def _commit_if_due(self) -> None:
        settings = self._settings
        age = time.monotonic() - self._opened_at
        if self._messages >= settings.replay_group_messages or age >= settings.replay_group_s:
            self.commit()
