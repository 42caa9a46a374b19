"""The inspector in a real browser: time to first render and to interactive.

One SQLite file holds 10,000 namespaces of 10 messages and one namespace whose
single memory session holds 100,000 messages (slices of 60). `partner-memory
serve` shows it; beside it, in the same run, datasette serves the same file
(its table pages are the usual way to look into a SQLite file in a browser).
Debian's Chromium, driven by Playwright, loads each page several times;
printed are the medians of first contentful paint ("render") and of the end
of DOMContentLoaded, after the page's deferred script ran ("interactive"),
and the size of the HTML.

Usage: python benchmarks/bench_inspector.py [--namespaces 10000] [--messages 100000]
       [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_http import free_port, start  # same folder: the scripts share helpers
from bench_scale import START, build, texts
from partner_memory.model import MemorySlice, Message, new_id
from partner_memory.store import UnitWrite, open_store
from partner_memory.store.contract.base import BulkWrite

CHROMIUM = "/usr/bin/chromium"
BIG = "big"
SLICE = 60


def build_database(database: str, namespaces: int, messages: int) -> tuple[str, str]:
    """The file, and the big unit's id and its first slice's id."""
    corpus = texts()
    store = open_store(database)
    try:
        for n in range(namespaces):
            build(store, f"ns-{n:05d}", 10, corpus)
        store.ensure_namespace(BIG, new_id())
        batch = [
            Message(*corpus[i % len(corpus)], timestamp=START + i * 30_000)  # type: ignore[arg-type]
            for i in range(messages)
        ]
        slices = [
            MemorySlice(new_id(), s, min(messages, s + SLICE), f"summary of {s}", START + s)
            for s in range(0, messages, SLICE)
        ]
        unit = UnitWrite(new_id(), START + messages * 30_000, 0, batch, slices)
        store.write_units(BIG, BulkWrite(unit.id, [unit]))
        return unit.id, slices[0].id
    finally:
        store.close()


def timings(page: Any, url: str, repeat: int) -> tuple[float, float, int]:
    """Median first contentful paint and DOMContentLoaded end (ms), and the HTML's bytes."""
    render, interactive, size = [], [], 0
    for _ in range(repeat):
        answer = page.goto(url, wait_until="load")
        if answer is None or not answer.ok:
            raise RuntimeError(f"{url}: {answer and answer.status}")
        size = len(answer.body())
        page.wait_for_function(
            "performance.getEntriesByName('first-contentful-paint').length > 0", timeout=5000
        )
        found = page.evaluate(
            """() => {
                const nav = performance.getEntriesByType('navigation')[0];
                const paint = performance.getEntriesByName('first-contentful-paint')[0];
                return [paint ? paint.startTime : NaN, nav.domContentLoadedEventEnd];
            }"""
        )
        render.append(found[0])
        interactive.append(found[1])
    return statistics.median(render), statistics.median(interactive), size


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespaces", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        database = str(Path(tmp) / "memory.db")
        began = time.perf_counter()
        unit, first = build_database(database, args.namespaces, args.messages)
        subprocess.run(
            [sys.executable, "-m", "partner_memory", "reindex", "--db", database, "-n", BIG],
            check=True,
            capture_output=True,
        )
        print(f"(built and indexed in {time.perf_counter() - began:.0f} s)")
        ours_port, peer_port = free_port(), free_port()
        ours = f"http://127.0.0.1:{ours_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        servers = [
            start([sys.executable, "-m", "partner_memory", "serve", "--db", database,
                   "--port", str(ours_port)], ours),
            start([sys.executable, "-m", "datasette", "serve", database, "-p", str(peer_port),
                   "--setting", "sql_time_limit_ms", "10000"], peer, health="/-/versions.json"),
        ]  # fmt: skip
        big_pk = _unit_pk(database, unit)
        pages = [
            (f"namespace list ({args.namespaces:,})", f"{ours}/", f"{peer}/memory/namespaces"),
            ("namespace search", f"{ours}/?q=ns-0999",
             f"{peer}/memory/namespaces?name__contains=ns-0999"),
            (f"unit of {args.messages:,} messages", f"{ours}/unit?ns={BIG}&unit={unit}",
             f"{peer}/memory/messages?unit_pk={big_pk}"),
            ("a slice and its messages", f"{ours}/slice?ns={BIG}&unit={unit}&slice={first}",
             f"{peer}/memory/messages?unit_pk={big_pk}&position__lt={SLICE}"),
            ("recall search", f"{ours}/recall?ns={BIG}&q=camping+last+summer",
             f"{peer}/memory/messages?content__contains=camping"),
        ]  # fmt: skip
        rows = []
        try:
            with sync_playwright() as driver:
                browser = driver.chromium.launch(executable_path=CHROMIUM)
                page = browser.new_page()
                for name, mine, theirs in pages:
                    ours_t = timings(page, mine, args.repeat)
                    peer_t = timings(page, theirs, args.repeat)
                    rows.append((name, ours_t, peer_t))
                browser.close()
        finally:
            for server in servers:
                server.terminate()
                server.wait(30)
    print(f"\nmedians of {args.repeat} loads, Chromium headless, loopback, SQLite\n")
    print(
        "| page | render ms | interactive ms | HTML KB | datasette render ms"
        " | datasette interactive ms | datasette HTML KB | interactive vs datasette |"
    )
    print("| --- " * 8 + "|")
    for name, (r, i, s), (pr, pi, ps) in rows:
        print(
            f"| {name} | {r:.0f} | {i:.0f} | {s / 1024:.0f} | {pr:.0f} | {pi:.0f}"
            f" | {ps / 1024:.0f} | {i / pi:.2f}x |"
        )


def _unit_pk(database: str, unit_id: str) -> int:
    import sqlite3

    with sqlite3.connect(database) as conn:
        return int(conn.execute("SELECT pk FROM units WHERE unit_id = ?", (unit_id,)).fetchone()[0])


if __name__ == "__main__":
    main()
