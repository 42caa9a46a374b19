"""Time as an injected collaborator, so replays and tests control 'now'."""

from __future__ import annotations

import time
from collections.abc import Callable

#: Returns the current time in milliseconds since the epoch.
Clock = Callable[[], int]


def system_clock() -> int:
    return time.time_ns() // 1_000_000
