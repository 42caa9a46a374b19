"""The numbers of dialog rolling (R13-R19), all configurable; defaults are the reference's."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from partner_memory.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class RollingSettings:
    #: R13: roll when the trajectory holds at least this many messages...
    max_messages: int = 72
    #: ...keeping the newest 1/retain_divisor of them.
    retain_divisor: int = 6
    #: R14: an idle rolling fires after this long without interaction (ms)...
    idle_after_ms: int = 3_600_000
    #: ...checked this often by the background timer (s; 0 disables the timer).
    idle_check_interval_s: float = 10.0
    #: R17: bodies longer than this are compressed for the summariser...
    compress_threshold: int = 1200
    #: ...or cut to this many characters...
    compress_limit: int = 900
    #: ...moving each cut to a sentence boundary within this many characters.
    boundary_window: int = 80
    #: R19: the dialog_history block's replace-fade, time-fade per minute and activation.
    replace_fade: float = 20.0
    time_fade_per_minute: float = 5.0
    activate: float = 10.0
    #: How many of the newest slices are put back in context when a memory opens.
    restore_slices: int = 5
    #: All LLM calls of one rolling (compressions and the summary) end within this
    #: many seconds; what is left undone falls back to the offline way.
    llm_budget_s: float = 300.0
    #: R15 across processes: a rolling's lease lasts this long (s) unless renewed,
    #: so a killed process blocks the namespace's rolling for at most this long.
    lease_ttl_s: float = 60.0
    #: A replay (ingest) writes its recordings and rollings in one transaction per
    #: this many messages, or per this many seconds of work, whichever comes first:
    #: fewer transactions are faster, and a crash loses at most one group's work.
    replay_group_messages: int = 5000
    replay_group_s: float = 1.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value: float = getattr(self, f.name)
            integral = f.type == "int"
            kinds: tuple[type, ...] = (int,) if integral else (int, float)
            if isinstance(value, bool) or not isinstance(value, kinds):
                kind = "an integer" if integral else "a number"
                raise ConfigurationError(f"rolling setting {f.name} must be {kind}, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ConfigurationError(
                    f"rolling setting {f.name} must be a finite number >= 0, got {value}"
                )
        if self.retain_divisor < 1:
            raise ConfigurationError("rolling setting retain_divisor must be at least 1")
        if self.max_messages < 2:
            raise ConfigurationError("rolling setting max_messages must be at least 2")
        if self.lease_ttl_s < 0.5:
            raise ConfigurationError("rolling setting lease_ttl_s must be at least 0.5 s")
        if self.replay_group_messages < 1:
            raise ConfigurationError("rolling setting replay_group_messages must be at least 1")
        if self.compress_limit < 40:
            raise ConfigurationError("rolling setting compress_limit must be at least 40")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RollingSettings:
        """PARTNER_MEMORY_ROLLING_<FIELD> for any field (MAX_MESSAGES, IDLE_AFTER_MS, ...)."""
        env = os.environ if environ is None else environ
        given: dict[str, Any] = {}
        for f in fields(cls):
            name = f"{ENV_PREFIX}{f.name.upper()}"
            raw = env.get(name)
            if raw is None or not raw.strip():
                continue
            try:
                given[f.name] = int(raw) if f.type == "int" else float(raw)
            except ValueError:
                kind = "a whole number" if f.type == "int" else "a number"
                raise ConfigurationError(f"{name} must be {kind}, got {raw!r}") from None
        try:
            return cls(**given)
        except ConfigurationError as exc:
            culprit = next((f for f in given if f"setting {f} " in str(exc)), None)
            where = f"{ENV_PREFIX}{culprit.upper()}" if culprit else f"{ENV_PREFIX}*"
            raise ConfigurationError(f"{exc} (from {where})") from None


#: Environment variables of rolling settings start with this.
ENV_PREFIX = "PARTNER_MEMORY_ROLLING_"
