"""examples/ag-ui-frontend in headless Debian chromium (playwright), served from another origin
than the API (WAYSTATION_CORS_ORIGINS): a planner run started from the page shows its messages
and the `book_vendor` approval; approved with edited arguments, the agent answers. Screenshots
go to tests/artifacts/ag-ui/."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from playwright.async_api import async_playwright, expect

from tests.helpers import live_api
from waystation.api.auth import issue_token

SECRET = "ag-ui-page-secret-0123456789-0123456789-abc"
ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "examples" / "ag-ui-frontend"
SHOTS = ROOT / "tests" / "artifacts" / "ag-ui"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def chromium() -> Path:
    # Fails (never skips) without chromium: scripts/install-system-packages installs it.
    assert CHROMIUM.exists(), "scripts/install-system-packages installs chromium"
    SHOTS.mkdir(parents=True, exist_ok=True)
    return CHROMIUM


@pytest.fixture
def page_origin() -> Iterator[str]:
    """The example folder over HTTP on a port of its own: another origin than the API's."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(PAGE))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_the_page_shows_the_run_and_approves_a_tool_call_with_an_edit(
        migrated_url, dev_env, pool, task_queue, page_origin, chromium):
    token = issue_token(SECRET, "dev")  # type: ignore[arg-type]
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=1.0, cors_origins=page_origin) as api, \
            async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(chromium),
                                                   args=["--no-sandbox"])
        page = await browser.new_page(viewport={"width": 1000, "height": 900})
        await page.goto(f"{page_origin}/index.html#api={api.url}&token={token}&send=1")
        card = page.locator(".interrupt")
        await expect(card).to_be_visible(timeout=30_000)
        await expect(card.locator("h3")).to_have_text("Allow book_vendor?")
        await expect(page.locator("#messages li.user")).to_contain_text("Book Rosewood Estate")
        await page.screenshot(path=str(SHOTS / "approval.png"), full_page=True)

        editor = card.locator("textarea")
        await editor.fill((await editor.input_value()).replace('"guests": 200', '"guests": 150'))
        await card.get_by_role("button", name="Approve with these arguments").click()
        await expect(page.locator("#status")).to_have_text(
            "The agent waits for your next message.", timeout=30_000)
        await expect(page.locator("#approvals")).to_be_hidden()
        await expect(page.locator("#messages li.assistant")).not_to_have_count(0)
        await page.screenshot(path=str(SHOTS / "answered.png"), full_page=True)
        thread = (await page.locator("#thread-id").text_content() or "").strip()

        # A reload reopens the thread: the same conversation, from MESSAGES_SNAPSHOT.
        await page.reload()
        await expect(page.locator("#messages li.assistant")).not_to_have_count(0)
        await browser.close()
        async with httpx.AsyncClient(base_url=api.url, headers={
                "Authorization": f"Bearer {token}"}) as http:
            decided = (await http.get(f"/runs/{thread}/decisions")).json()["decisions"][0]
    assert decided["decision"] == "edit" and decided["answer"]["guests"] == 150
