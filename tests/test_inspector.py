"""The inspector in a real browser (Debian's Chromium driven by Playwright), against a real
server holding a LoCoMo conversation: browse, search, forget as admin, and see what a
read-only key may not do. Screenshots of each page go to build/screenshots/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from partner_memory import PartnerMemory
from partner_memory.core import MemoryCore
from partner_memory.store import open_store
from tests.http_server import Server, make_key

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
LOCOMO = Path(
    os.environ.get("PARTNER_MEMORY_LOCOMO_DIR", ROOT.parent / "shared" / "data" / "locomo-dev")
)
CONVERSATION = LOCOMO / "conv-30.json"
SHOTS = ROOT / "build" / "screenshots"
NS = "locomo/conv-30"

pytestmark = [
    pytest.mark.skipif(
        not CHROMIUM.exists() and not os.environ.get("CI"),
        reason="Debian's chromium is not installed (.ci/run installs it)",
    ),
    pytest.mark.skipif(not CONVERSATION.exists(), reason=f"{CONVERSATION} is not present"),
]

playwright = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    database = str(tmp_path_factory.mktemp("inspector") / "memory.db")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "partner_memory",
            "ingest",
            str(CONVERSATION),
            "--db",
            database,
            "--namespace",
            NS,
            "--json",
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    running = Server(database)
    yield running, database
    running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        launched.close()


class Visit:
    """A browser context that fails on any console error and saves screenshots."""

    def __init__(self, browser: object, server: Server, **options: object) -> None:
        self.context = browser.new_context(  # type: ignore[attr-defined]
            base_url=server.url, timezone_id="Asia/Tokyo", **options
        )
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def login(self, key: str) -> None:
        self.page.goto("/")
        assert "/login" in self.page.url  # keys exist: the page asks for one
        self.page.fill("#key", key)
        self.page.click("button[type=submit]")
        assert self.page.url.endswith("/")

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()
        assert self.errors == [], self.errors


def _rare_word(database: str) -> tuple[str, str, str, str]:
    """A word said once in the whole conversation, and where: (word, unit, slice, message id)."""
    store = open_store(database)
    try:
        core = MemoryCore(store, NS, create=False)
        counts: Counter[str] = Counter()
        places = {}
        for unit_id in core.unit_ids():
            slices = core.list_slices(unit_id)
            for position, message in enumerate(core.read_messages(unit_id)):
                for word in set(re.findall(r"[a-z]{9,}", message.content.lower())):
                    counts[word] += 1
                    held = next(s for s in slices if s.start_index <= position < s.end_index)
                    places[word] = (unit_id, held.id, message.id)
        word = sorted(w for w, n in counts.items() if n == 1)[0]
        return (word, *places[word])
    finally:
        store.close()


def test_browse_search_and_forget_as_admin(served: tuple[Server, str], browser: object) -> None:
    server, database = served
    _, admin = make_key(database, "*", "admin")
    word, unit_id, slice_id, message_id = _rare_word(database)
    visit = Visit(browser, server)
    page = visit.page
    visit.login(admin)
    assert page.get_by_role("link", name=NS).is_visible()
    visit.shot("namespaces")

    page.get_by_role("link", name=NS).click()
    assert page.get_by_role("heading", name="Memory sessions").is_visible()
    assert page.locator("article.block").count() >= 1  # the context as the agent gets it
    times = page.locator("main time").first
    assert not times.inner_text().endswith("UTC")  # shown in the browser's zone
    visit.shot("namespace")

    page.locator("ol.units > li > a").first.click()
    assert page.locator("h1").inner_text().startswith("Memory session")
    visit.shot("unit")
    page.locator("ol.slices li a").first.click()
    assert page.locator("ol.provenance li.sentence").count() > 0  # the summary, traced
    assert page.locator("li.message").count() > 0
    visit.shot("slice")

    page.goto(f"/recall?ns={NS}")
    page.fill("#q", word)
    page.press("#q", "Enter")
    assert page.locator("li.hit mark").first.inner_text().lower().startswith(word)
    visit.shot("recall")
    page.locator("li.hit").first.get_by_role("link", name="Open its slice").click()
    assert page.locator(f"#m-{message_id}").is_visible()
    assert word in page.locator(f"#m-{message_id}").inner_text().lower()

    page.check(f"#pick-{message_id}")
    page.get_by_role("button", name="Forget the selected messages…").click()
    assert page.get_by_role("heading", name="Forget for good?").is_visible()
    visit.shot("confirm")
    page.get_by_role("button", name="Forget for good").click()
    assert page.url.endswith(f"slice={slice_id}")
    assert "(forgotten)" in page.locator(f"#m-{message_id}").inner_text()
    assert word not in page.locator("main").inner_text().lower()  # summary written again
    page.goto(f"/recall?ns={NS}&q={word}")
    hits = page.locator("li.hit").all_inner_texts()
    assert all(word not in hit.lower() for hit in hits)
    assert page.locator(f"a[href$='#m-{message_id}']").count() == 0
    page.goto(f"/namespace?ns={NS}")
    assert word not in page.locator("main").inner_text().lower()  # context and window

    page.goto(f"/namespace?ns={NS}")  # a slice, then a whole session, forgotten from the page
    page.locator("ol.units > li > a").nth(1).click()
    session = page.url.split("unit=")[1]
    page.locator("ol.slices li a").first.click()
    page.get_by_role("button", name="Forget this slice and its messages…").click()
    page.get_by_role("button", name="Forget for good").click()
    assert "/unit?" in page.url
    assert page.url.endswith(f"unit={session}")
    page.locator("ol.slices li a").first.click()  # the slice stays, its messages do not
    assert page.locator("li.message").count() == page.locator("li.message.forgotten").count()
    page.goto(f"/unit?ns={NS}&unit={session}")
    page.get_by_role("button", name="Forget this memory session…").click()
    page.get_by_role("button", name="Forget for good").click()
    assert "/namespace?" in page.url
    assert page.locator(f"a[href$='unit={session}']").count() == 0

    page.goto(f"/rollings?ns={NS}")
    assert page.locator("svg rect").count() > 0
    assert page.locator("tbody tr").count() > 0
    visit.shot("rollings")
    page.goto("/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    visit.close()
    assert unit_id


def test_a_read_key_sees_no_forget_and_is_refused(
    served: tuple[Server, str], browser: object
) -> None:
    server, database = served
    _, reader = make_key(database, "locomo/*", "read")
    visit = Visit(browser, server)
    page = visit.page
    visit.login(reader)
    page.get_by_role("link", name=NS).click()
    assert page.locator("form.forget").count() == 0
    page.locator("ol.units > li > a").first.click()
    page.locator("ol.slices li a").first.click()
    assert page.locator("input[type=checkbox]").count() == 0
    assert page.locator("button.danger").count() == 0
    forced = page.request.post(
        "/forget",
        form={"ns": NS, "target": "namespace", "confirmed": "yes"},
        headers={"Origin": server.url},
    )
    assert forced.status == 403
    assert open_store(database).get_namespace(NS) is not None
    visit.close()


def test_pages_read_without_javascript_and_refuse_other_sites(
    served: tuple[Server, str], browser: object
) -> None:
    server, database = served
    _, admin = make_key(database, "*", "admin")
    visit = Visit(browser, server, java_script_enabled=False)
    page = visit.page
    visit.login(admin)
    page.get_by_role("link", name=NS).click()
    assert page.locator("main time").first.inner_text().endswith("UTC")
    page.locator("ol.units > li > a").first.click()
    page.locator("ol.slices li a").first.click()
    assert page.locator("li.message").count() > 0
    elsewhere = page.request.post(
        "/forget",
        form={"ns": NS, "target": "namespace", "confirmed": "yes"},
        headers={"Origin": "http://elsewhere.example"},
    )
    assert elsewhere.status == 403  # a form from another site, even with the admin's cookie
    assert visit.errors == []
    page.goto("/namespace?ns=no-such-namespace")
    assert page.locator("h1").inner_text() == "404"
    assert [e for e in visit.errors if "404" not in e] == []  # the browser reports the 404
    visit.errors.clear()
    visit.close()


class _MadeUp:
    """An LLM-like summariser that says one thing its messages never said."""

    name = "llm"

    def summarize(self, messages: object, meter: object) -> str:
        return "Mei adopted a kitten called Luna. Mei owns a sailing yacht called Seahorse."


def test_a_summary_sentence_opens_its_message_and_a_made_up_one_is_marked(
    served: tuple[Server, str], browser: object
) -> None:
    server, database = served
    _, admin = make_key(database, "*", "admin")
    with PartnerMemory(
        open_store(database), "traced", summarizers=[_MadeUp()], owns_store=True, idle_timer=False
    ) as memory:
        memory.record_turn("I adopted a kitten called Luna", "Lovely name!", source="USER: Mei")
        rolled = memory.roll_now()
        assert rolled is not None
        unit, luna = rolled.memory_unit.id, rolled.increment_messages[0].id
    visit = Visit(browser, server)
    page = visit.page
    visit.login(admin)
    page.goto(f"/slice?ns=traced&unit={unit}&slice={rolled.memory_slice.id}")
    sentences = page.locator("ol.provenance li.sentence")
    assert sentences.count() == 2
    assert page.locator("li.sentence.unsupported").count() == 1
    assert "Seahorse" in page.locator("li.sentence.unsupported").inner_text()
    assert "not supported by its messages" in page.locator("li.unsupported .flag").inner_text()
    visit.shot("slice-provenance")
    sentences.first.locator("a.source").click()
    assert page.url.endswith(f"#m-{luna}")
    assert "Luna" in page.locator(f"#m-{luna}").inner_text()
    visit.close()
