"""Issue 29's seed items where a person looks for them, in a real browser (headless Debian
chromium) against the real API and a worker on the Temporal dev server: a skipped task on the
run page, flagged answers and a re-run from a step on the batch page, hiding and restoring a
run, and the runs list's quiet-running and app-package filters.

Screenshots go to tests/artifacts/console/ (gitignored), as in
tests/browser/test_console_browser.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest_asyncio
from playwright.async_api import expect

from tests.browser.test_console_browser import (  # noqa: F401 - the browser fixtures
    SECRET,
    bearer,
    browser,
    chromium,
    shot,
    signed_in_page,
    start,
)
from tests.helpers import IDEA, FailingTasks, eventually
from waystation.activities.agents import AgentRequest, AgentResponse
from waystation.activities.agents.base import ProgressReporter
from waystation.persistence.runs import create_run
from waystation.settings import Settings
from waystation.testing import InProcessApi
from waystation.worker import build_worker


class EchoingBatch(FailingTasks):
    """Batch steps answer with their prompt (so an item's placeholder reaches the answer, as an
    unrendered one reached the model in seed 002); crew tasks as FailingTasks does."""

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        if request.crew == "batch":
            return AgentResponse(text=f"{request.task}: {request.instructions}", model="echo")
        return await super().run(request, progress)


BACKEND = EchoingBatch()


@pytest_asyncio.fixture(scope="module")
async def live(migrated_url, dev_env, pool) -> AsyncIterator[InProcessApi]:
    task_queue = f"tq-{uuid.uuid4()}"
    settings = Settings(database_url=migrated_url, jwt_secret=SECRET,
                        temporal_task_queue=task_queue, sse_heartbeat_seconds=1.0,
                        temporal_address=dev_env.client.service_client.config.target_host)
    api = InProcessApi(settings)
    await api.start()
    async with build_worker(dev_env.client, pool, task_queue=task_queue, backend=BACKEND):
        yield api
        await api.stop()


async def _finished(live: InProcessApi, user: str, run_id: str) -> dict:
    async def check() -> dict | None:
        async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
            run = (await http.get(f"/runs/{run_id}", headers=bearer(user))).json()
        return run if run.get("status") in ("completed", "failed", "canceled") else None
    return await eventually(check, timeout=60)


async def test_skipped_task_on_the_run_page_then_hide_and_restore(browser, live, pool):  # noqa: F811
    user = f"sk-{uuid.uuid4().hex[:6]}"
    BACKEND.failing = {"assess_fit"}
    run_id = await start(live, user, "validation", {"entrepreneur_input": IDEA, "gates": []})
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs/{run_id}")
    card = page.locator("article.decision", has_text="assess_fit failed")
    await card.get_by_role("button", name="Skip the task").click()
    await expect(page.locator("h1 .badge")).to_have_text("completed", timeout=60_000)
    skipped = page.locator("table.tasks tr", has_text="assess_fit")
    await expect(skipped.locator(".badge")).to_have_text("skipped")
    await expect(page.locator("table.events")).to_contain_text("task.skipped")
    await shot(page, "seed-skipped-task")

    page.on("dialog", lambda dialog: dialog.accept())
    await page.get_by_role("button", name="Hide run").click()
    await expect(page.locator("h1 .badge")).to_have_text("hidden")
    await expect(page.get_by_role("button", name="Restore run")).to_be_visible()
    await shot(page, "seed-hidden-run")

    await page.goto(f"{live.url}/#/runs")
    await expect(page.locator(f"tr[data-run-id='{run_id}']")).to_have_count(0)
    await page.get_by_label("Hidden by me").check()
    row = page.locator(f"tr[data-run-id='{run_id}']")
    await expect(row).to_be_visible()
    await shot(page, "seed-runs-hidden")
    await row.get_by_role("button", name="Restore").click()
    await expect(page.locator("h1 .badge")).to_have_text("completed")
    await expect(page.get_by_role("button", name="Hide run")).to_be_visible()
    await page.context.close()


async def test_flagged_answers_and_a_rerun_from_a_step_on_the_batch_page(
        browser, live, pool):  # noqa: F811
    user = f"fl-{uuid.uuid4().hex[:6]}"
    run_id = await start(live, user, "batch", {
        "name": "graded summaries", "test_first": False,
        "items": [{"text": "a clean posting"}, {"text": "Grade {session_9_output} now"},
                  {"text": "another clean one"}],
        "steps": [{"name": "summarize", "template": "Summarize: {{ item.text }}"},
                  {"name": "grade", "template": "Grade: {{ outputs.summarize }}"}]})
    await _finished(live, user, run_id)
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs/{run_id}")
    await expect(page.locator("#job-figures")).to_contain_text("3 of 3 done")
    await page.get_by_label("Flagged answers only").check()
    rows = page.locator("table.items tbody tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first.locator(".badge.status-flagged")).to_be_visible()
    await page.get_by_role("button", name="Open item 1").click()
    detail = page.locator(".item-detail")
    await expect(detail).to_contain_text("{session_9_output}")
    await expect(detail.locator("ul.flags")).to_contain_text("never filled in")
    await detail.get_by_label("Re-run from step").select_option("grade")
    await shot(page, "seed-batch-flagged")
    await detail.get_by_role("button", name="Re-run as a new job").click()
    await expect(page.get_by_role("heading",
                                  name="Job: graded summaries (rerun from grade)")).to_be_visible()
    await expect(page.locator("#job-figures")).to_contain_text("1 of 1 done")
    await page.context.close()


async def test_runs_list_quiet_running_and_app_package_filters(browser, live, pool):  # noqa: F811
    user = f"st-{uuid.uuid4().hex[:6]}"
    quiet, busy, app = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    async with pool.acquire() as conn:
        for run_id, kind, run_input in (
                (quiet, "batch", {"name": "stuck job"}), (busy, "batch", {"name": "busy job"}),
                (app, "mobile_agent", {"app_package": "com.example.notes"})):
            await create_run(conn, run_id=run_id, kind=kind, owner=user, group_id=None,
                             workflow_id=f"x-{run_id}", idempotency_key=None, input=run_input)
        await conn.execute("UPDATE runs SET status = 'running' WHERE id = ANY($1::uuid[])",
                           [quiet, busy])
        await conn.execute("UPDATE runs SET updated_at = now() - interval '2 hours' "
                           "WHERE id = $1", quiet)
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs")
    await page.get_by_label("Running, quiet for").select_option(label="an hour")
    await expect(page.locator(f"tr[data-run-id='{quiet}']")).to_be_visible()
    await expect(page.locator(f"tr[data-run-id='{busy}']")).to_have_count(0)
    await shot(page, "seed-runs-quiet")
    await page.get_by_label("Running, quiet for").select_option(label="any time")
    await page.get_by_label("App package").fill("com.example.notes")
    await page.get_by_role("button", name="Apply").click()
    await expect(page.locator(f"tr[data-run-id='{app}']")).to_be_visible()
    await expect(page.locator("table.runs tbody tr")).to_have_count(1)
    await shot(page, "seed-runs-app-package")
    await page.context.close()
