"""Give memory back after a burst: a serving process returns what it freed.

A request with a large body, or a recall over a window of long messages,
allocates hundreds of MB for a moment. Python frees those objects, but
glibc's allocator keeps the freed pages in its arenas, so a long-running
`serve` would sit at its peak for ever. A daemon thread looks at the
process's resident size every `interval_s` (one read of /proc/self/statm) and,
when it has grown by `growth` bytes since the last trim, or when the allocator
holds `growth` more bytes freed than then (glibc's `mallinfo2`), asks it to release
its free pages (`malloc_trim`). The second look matters: a trim taken at the
peak, while the burst is still in use, moves the floor up to the peak, and
what the burst frees afterwards never grows the resident size again. Where
there is no glibc or no /proc, it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
from collections.abc import Callable
from functools import cache

log = logging.getLogger(__name__)

#: How often the resident size is looked at.
TRIM_INTERVAL_S = 2.0
#: Growth of the resident size since the last trim that calls for the next one.
TRIM_GROWTH_BYTES = 32 << 20


def rss_bytes() -> int | None:
    """This process's resident size (None where /proc does not tell)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            resident = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident * os.sysconf("SC_PAGE_SIZE")


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class _MallInfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (2.33+): ten size_t counters
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


@cache
def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        info = ctypes.CDLL(name).mallinfo2
    except (OSError, AttributeError):  # glibc before 2.33, or not glibc
        return None
    info.argtypes = []
    info.restype = _MallInfo2
    return info


def free_held() -> int | None:
    """Bytes the allocator holds freed in its arenas (None where glibc does not tell)."""
    found = _mallinfo2()
    if found is None:
        return None
    return int(found().fordblks)


def trim() -> bool:
    """Return the allocator's free pages to the system; False where it cannot."""
    found = _malloc_trim()
    if found is None:
        return False
    found(0)
    return True


class MemoryTrimmer:
    """The thread that trims after growth; `stop` ends it."""

    def __init__(
        self, *, interval_s: float = TRIM_INTERVAL_S, growth: int = TRIM_GROWTH_BYTES
    ) -> None:
        self.interval_s = interval_s
        self.growth = growth
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-trim", daemon=True)

    def start(self) -> MemoryTrimmer:
        if _malloc_trim() is not None and rss_bytes() is not None:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        # the resident size and the allocator's free bytes after the last trim (or at
        # start): memory in use stays, and trimmed free pages still count as free, so
        # only growth beyond either calls for another trim
        floor, free_floor = rss_bytes() or 0, free_held() or 0
        while not self._stopped.wait(self.interval_s):
            now, free = rss_bytes() or 0, free_held() or 0
            if now - floor <= self.growth and free - free_floor <= self.growth:
                floor, free_floor = min(floor, now), min(free_floor, free)
                continue
            trim()
            floor, free_floor = rss_bytes() or now, free_held() or free
            log.debug("allocator trimmed: %d MB resident", floor >> 20)
