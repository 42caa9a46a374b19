"""The trimmer gives back what a burst frees after a trim taken at its peak.

A trim at the peak, while the burst is still in use, leaves the resident size where it
is; what the burst frees afterwards never grows it again, so only the allocator's own
count of freed bytes can tell the trimmer to look again. Run in a child process, whose
allocator is its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from partner_memory.http.memory_trim import free_held, rss_bytes

CHILD = """
import time
from partner_memory.http.memory_trim import MemoryTrimmer, rss_bytes

MB = 1 << 20
before = rss_bytes()
burst = [bytes(2000) for _ in range(100_000)]  # ~200 MB from glibc's heap
pin = bytes(2000)  # keeps the heap's top from shrinking by itself when the burst goes
trimmer = MemoryTrimmer(interval_s=0.1).start()  # its first look is at the peak
time.sleep(0.5)
del burst
deadline = time.monotonic() + 30
while rss_bytes() > before + 64 * MB and time.monotonic() < deadline:
    time.sleep(0.1)
trimmer.stop()
print(before // MB, rss_bytes() // MB)
"""


@pytest.mark.skipif(
    rss_bytes() is None or free_held() is None, reason="needs /proc and glibc 2.33+"
)
def test_a_trim_at_the_peak_does_not_keep_the_burst() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    before, after = (int(n) for n in done.stdout.split())
    assert after <= before + 64, f"resident {after} MB after the burst, {before} MB before"
