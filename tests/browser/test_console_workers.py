"""The console's Workers page and a job's description, metadata and test verdict, in headless
chromium against the real API and a real worker (the fixtures of test_console_browser)."""

from __future__ import annotations

import uuid

from playwright.async_api import expect

from tests.browser.test_console_browser import (  # noqa: F401 - fixtures
    browser,
    chromium,
    live,
    shot,
    signed_in_page,
    start,
)


async def test_workers_page_shows_the_worker_running_the_job_then_idle(
        browser, live, pool, dev_env):  # noqa: F811
    user = f"wo-{uuid.uuid4().hex[:6]}"
    items = [{"text": f"ticket {i}"} for i in range(60)]
    run_id = await start(live, user, "batch", {
        "name": "triage", "items": items, "max_workers": 1, "test_first": True,
        "description": "Triage the support tickets of the week",
        "metadata": {"ticket_source": "helpdesk", "week": 47},
        "steps": [{"name": "triage", "template": "Triage: {{ item.text }}"}]})
    page = await signed_in_page(browser, live, pool, user)
    await page.get_by_role("link", name="Workers").click()
    await expect(page.get_by_role("heading", name="Workers")).to_be_visible()
    # The worker is the one process of this test, polling under its client's identity.
    row = page.locator(f'tr[data-worker-id="{dev_env.client.identity}"]')
    await expect(row).to_be_visible()
    await expect(row.locator(".badge")).to_have_text("active")
    # The item it runs now, linked to its job, while it runs.
    await expect(row.locator(f'a[href="#/runs/{run_id}"]')).to_be_visible()
    await expect(row).to_contain_text("polls workflow and activity tasks")
    await shot(page, "workers")

    # Once the job is done the page, left open, shows the worker idle with its items counted.
    await expect(row.locator(".badge")).to_have_text("idle", timeout=40_000)
    completed = int((await row.locator("td.completed").inner_text()).replace(",", ""))
    assert completed >= len(items)
    await expect(row.locator(f'a[href="#/runs/{run_id}"]')).to_have_count(0)

    await page.goto(f"{live.url}/#/runs/{run_id}")
    about = page.locator("#job-about")
    await expect(about).to_contain_text("Triage the support tickets of the week")
    await expect(about.locator("#job-test")).to_contain_text("passed")
    await expect(about).to_contain_text("helpdesk")
    await page.get_by_role("button", name="Open item 0").click()
    await expect(page.locator(".item-worker")).to_contain_text(dev_env.client.identity)
    await shot(page, "batch-job-about")
    await page.context.close()
