"""The API's documentation page renders in a real browser with the network cut off
(every request that is not to the service itself is refused): Swagger UI comes with
the service, not from a CDN."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http_server import Server

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (.ci/run installs it)",
)

playwright = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(str(tmp_path_factory.mktemp("docs") / "memory.db"))
    yield running
    running.stop()


def test_the_docs_render_air_gapped(served: Server) -> None:
    refused: list[str] = []
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM))
        try:
            context = browser.new_context(base_url=served.url)

            def only_the_service(route: object) -> None:
                url = route.request.url  # type: ignore[attr-defined]
                if url.startswith(served.url):
                    route.continue_()  # type: ignore[attr-defined]
                else:
                    refused.append(url)
                    route.abort()  # type: ignore[attr-defined]

            context.route("**/*", only_the_service)
            view = context.new_page()
            view.goto("/docs")
            view.wait_for_selector(".opblock", timeout=60_000)  # an operation, rendered
            assert "/v1/namespaces/{namespace}/recall" in view.content()
        finally:
            browser.close()
    assert refused == []
