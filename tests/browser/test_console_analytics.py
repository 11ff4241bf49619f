"""The console's Decisions analytics and Policies pages in headless Debian chromium, against
the real API (uvicorn, in process), a worker on the Temporal dev server running the planner
agent (its bookings wait at a tool approval), and PostgreSQL. Screenshots go to
tests/artifacts/console/ (gitignored) to be looked at."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio
from playwright.async_api import Browser, expect

from tests.browser.test_console_browser import (  # noqa: F401 - fixtures
    SECRET,
    bearer,
    browser,
    chromium,
    shot,
    signed_in_page,
)
from tests.helpers import eventually, live_api
from waystation.testing import InProcessApi

SMALL = "Book Rosewood Estate on 2027-02-14 for 40 guests"
LARGE = "Book Rosewood Estate on 2027-02-14 for 180 guests"


@pytest_asyncio.fixture
async def live(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[InProcessApi]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET) as api:
        yield api


async def decided_bookings(http: httpx.AsyncClient, user: str) -> None:
    """A policy approving small bookings; one small booking (the policy decides it) and three
    large ones a person decides."""
    made = await http.post("/policies", headers=bearer(user), json={
        "name": "small-bookings", "kind": "agent",
        "condition": 'request.tool.name == "book_vendor" && request.tool.args.guests <= 50',
        "decision": {"decision": "approve", "feedback": "a small booking"}})
    assert made.status_code == 201, made.text
    runs = []
    for message in (SMALL, LARGE, LARGE, LARGE):
        started = await http.post("/runs", headers=bearer(user), json={
            "kind": "agent", "input": {"message": message}})
        assert started.status_code == 201, started.text
        runs.append(started.json()["run_id"])
    for number, run_id in enumerate(runs[1:]):
        async def waiting(run_id: str = run_id) -> dict[str, Any] | None:
            listed = (await http.get(f"/runs/{run_id}/decisions", headers=bearer(user))).json()
            return listed["decisions"][0] if listed["decisions"] else None
        request = await eventually(waiting, timeout=60)
        decided = await http.post(
            f"/runs/{run_id}/decisions/{request['checkpoint_name']}", headers=bearer(user),
            json={"decision": "reject" if number == 0 else "approve"})
        assert decided.status_code == 200, decided.text


async def test_decisions_analytics_and_policies_pages(
        browser: Browser, live: InProcessApi, pool) -> None:  # noqa: F811
    user = f"ana-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        await decided_bookings(http, user)

        async def counted() -> bool:
            figures = (await http.get("/analytics/decisions", headers=bearer(user))).json()
            return figures["totals"]["decided"] == 4
        await eventually(counted)

    page = await signed_in_page(browser, live, pool, user)
    await page.get_by_role("link", name="Decisions").click()
    await expect(page.locator("#tile-decided .tile-value")).to_have_text("4")
    await expect(page.locator("#tile-policy .tile-value")).to_have_text("1")
    await expect(page.locator("#gate-table tbody tr")).to_have_count(1)
    await expect(page.locator("#gate-table tbody td").nth(1)).to_have_text(
        "approve_book_vendor")
    # Both charts drew (uPlot renders into a canvas), from the vendored library.
    await expect(page.locator("#chart-per-gate canvas")).to_have_count(1)
    await expect(page.locator("#chart-per-day canvas")).to_have_count(1)
    await shot(page, "decisions-analytics")

    await page.get_by_role("link", name="Policies").click()
    await expect(page.locator("#policies-table tbody tr")).to_have_count(1)
    await page.fill("#policy-name", "everything")
    await page.fill("#policy-kind", "agent")
    await page.fill("#policy-condition", "request.tool.args.guests <=")
    await page.fill("#policy-decision", "approve")
    await page.get_by_role("button", name="Create").click()
    await expect(page.locator("#policy-error")).to_contain_text("line 1, column 28")
    await expect(page.locator("#policy-condition")).to_have_attribute("aria-invalid", "true")
    await page.fill("#policy-condition", "request.tool.args.guests <= 500")
    await page.select_option("#policy-mode", "shadow")
    await page.get_by_role("button", name="Create").click()
    await expect(page.locator("#policies-table tbody tr")).to_have_count(2)
    await page.locator('tr[data-policy="small-bookings"]').get_by_role(
        "button", name="Dry run").click()
    dry = page.locator("#policies-dry-run")
    await expect(dry).to_contain_text("on the last 4 requests: holds on 1; agrees with 1 of 1")
    await shot(page, "policies")
