"""Peak memory and time of embedding a window holding one long message: recall's bounded
embedding (`embed_bounded`) beside the static model called on the whole batch, as before.

Each case runs in a process of its own, so its peak RSS is its own.

    python benchmarks/bench_long_messages.py
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

WINDOW = 60
LONG_CHARS = (2_000, 20_000, 100_000)
FILLER = "we walked the dog along the river and talked about the trip. "


def _case(mode: str, chars: int) -> None:
    from partner_memory.recall.embed import StaticEmbedder, embed_bounded

    model = StaticEmbedder()
    model.warm()
    texts = [f"message {i} about kyoto" for i in range(WINDOW - 1)]
    texts.append(FILLER * (chars // len(FILLER)))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(5):  # the peak is the first run's; the time, the best of five
        started = time.perf_counter()
        if mode == "bounded":
            embed_bounded(model, texts)
        else:
            model.embed(texts)
        times.append(time.perf_counter() - started)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"grew_mib": (peak - base) / 1024, "ms": min(times) * 1000}))


def _run(mode: str, chars: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, mode, str(chars)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    print(f"one long message in a window of {WINDOW}: peak RSS growth and time of one embed")
    print(
        f"{'long message':>14} | {'bounded MiB':>11} | {'whole MiB':>9} | {'ratio':>6} |"
        f" {'bounded ms':>10} | {'whole ms':>8}"
    )
    for chars in LONG_CHARS:
        bounded, whole = _run("bounded", chars), _run("whole", chars)
        ratio = whole["grew_mib"] / max(bounded["grew_mib"], 1.0)
        print(
            f"{chars:>14,} | {bounded['grew_mib']:>11.0f} | {whole['grew_mib']:>9.0f} |"
            f" {ratio:>5.1f}x | {bounded['ms']:>10.1f} | {whole['ms']:>8.1f}"
        )


if __name__ == "__main__":
    if len(sys.argv) == 3:
        _case(sys.argv[1], int(sys.argv[2]))
    else:
        main()
