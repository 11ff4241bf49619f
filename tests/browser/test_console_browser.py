"""The web console in a real browser: headless Debian chromium driven by playwright, against
the real API (uvicorn, in process), a real worker on the Temporal dev server, and PostgreSQL.

Screenshots of every page go to tests/artifacts/console/ (gitignored) to be looked at.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.console_helpers import append_events, login_path, open_gate
from tests.helpers import IDEA, new_validation_run
from waystation.activities.agents import backend_named
from waystation.api.auth import issue_token
from waystation.persistence.groups import create_group
from waystation.persistence.runs import create_run
from waystation.persistence.writes import (
    EventWrite,
    ReadModelWrite,
    RunStateWrite,
    SnapshotWrite,
    apply_write,
)
from waystation.settings import Settings
from waystation.testing import InProcessApi
from waystation.worker import build_worker

SECRET = "browser-secret-0123456789-0123456789-abcdef"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SHOTS = Path(__file__).resolve().parents[1] / "artifacts" / "console"
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def chromium() -> Path:
    # Fails (never skips) without chromium: scripts/install-system-packages installs it.
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing; run scripts/install-system-packages"
    SHOTS.mkdir(parents=True, exist_ok=True)
    return CHROMIUM


@pytest_asyncio.fixture(scope="module")
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(chromium),
                                                   args=CHROMIUM_ARGS)
        yield browser
        await browser.close()


@pytest_asyncio.fixture(scope="module")
async def live(migrated_url, dev_env, pool, tmp_path_factory) -> AsyncIterator[InProcessApi]:
    task_queue = f"tq-{uuid.uuid4()}"
    artifacts = tmp_path_factory.mktemp("artifacts")
    settings = Settings(database_url=migrated_url, jwt_secret=SECRET,
                        temporal_task_queue=task_queue, sse_heartbeat_seconds=1.0,
                        temporal_address=dev_env.client.service_client.config.target_host,
                        artifact_dir=artifacts)
    api = InProcessApi(settings)
    await api.start()
    # Paced so that a page can watch tasks and items move.
    async with build_worker(dev_env.client, pool, task_queue=task_queue,
                            backend=backend_named("offline", delay_ms=90),
                            artifact_dir=artifacts):
        yield api
        await api.stop()
    # Streams the browser left open die with the server as suspended async generators. Collect
    # them now, on this loop: collected later, inside another module's import (pytest's
    # assertion rewriting), their finalizers trip CPython 3.11.7's "AST constructor recursion
    # depth mismatch".
    gc.collect()
    # The collected generators' finalizers schedule their closing on this loop; nothing hands them
    # to us to await, so they get a moment to run.
    await asyncio.sleep(0.2)


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user)}"}


async def start(live: InProcessApi, user: str, kind: str, body: dict,
                gates: dict | None = None) -> str:
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        response = await http.post("/runs", json={"kind": kind, "input": body,
                                                  **({"gates": gates} if gates else {})},
                                   headers=bearer(user))
    assert response.status_code == 201, response.text
    return response.json()["run_id"]


async def signed_in_page(browser: Browser, live: InProcessApi, pool, user: str,
                         viewport: dict | None = None) -> Page:
    context = await browser.new_context(viewport=viewport or LAPTOP)
    page = await context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    await page.goto(live.url + await login_path(pool, user))
    # The code is spent and gone from the address bar and from history.
    assert page.url == live.url + "/"
    await expect(page.get_by_text(f"Signed in as {user}")).to_be_visible()
    return page


async def shot(page: Page, name: str) -> None:
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


async def test_decision_arrives_live_is_approved_with_a_click_and_the_run_moves_on(
        browser, live, pool):
    user = f"ann-{uuid.uuid4().hex[:6]}"
    inbox = await signed_in_page(browser, live, pool, user)
    await expect(inbox.locator("#inbox-count")).to_have_text("0 decisions waiting for you")
    assert await inbox.evaluate("history.length") == 1 or "code=" not in await inbox.evaluate(
        "location.href")
    run_id = await start(live, user, "validation", {"entrepreneur_input": IDEA})

    # The request arrives without a reload, its evidence rendered for a person.
    card = inbox.locator("article.decision").first
    await expect(card.get_by_role("heading", name="Approve the founder's brief")).to_be_visible()
    await expect(card.locator("dl.kv").first).to_be_visible()
    await expect(card.get_by_role("button", name="Approve recommended")).to_be_visible()
    await expect(inbox.locator("#inbox-count")).to_have_text("1 decision waiting for you")
    await shot(inbox, "inbox")

    # The run page, open beside it, then shows the next phase live.
    run_page = await inbox.context.new_page()
    await run_page.goto(f"{live.url}/#/runs/{run_id}")
    await expect(run_page.locator(".phase").first).to_contain_text("Phase 0")
    await expect(run_page.locator("#pending-h")).to_be_visible()
    await card.get_by_label("Feedback").fill("Clear brief; go on.")
    await card.get_by_role("button", name="Approve recommended").click()
    await expect(card.locator(".card-status")).to_contain_text(f"approved: approve by {user}")
    await expect(run_page.locator(".phase", has_text="Phase 1")).to_be_visible()
    await expect(run_page.locator("table.events")).to_contain_text("phase.started")
    # The decision is in the run's history with who, what and why.
    decisions = run_page.locator("section[aria-labelledby=decisions-h]")
    await expect(decisions).to_contain_text("Clear brief; go on.")
    await expect(decisions).to_contain_text(user)
    await expect(run_page.locator("dl.facts")).to_contain_text("vpc_discovery")
    # The snapshot history offers two snapshots and their difference.
    await expect(run_page.locator("#snap-b option")).not_to_have_count(0)
    temporal_link = run_page.get_by_role("link", name="Open in Temporal Web UI")
    assert (await temporal_link.get_attribute("href")).endswith(f"/workflows/validation-{run_id}")
    await expect(inbox.locator("article.decision", has_text="value proposition")).to_be_visible()
    await shot(run_page, "run")
    await inbox.context.close()


async def test_typed_answer_form_refuses_invalid_input_and_the_run_gets_the_answer(
        browser, live, pool):
    user = f"tia-{uuid.uuid4().hex[:6]}"
    page = await signed_in_page(browser, live, pool, user)
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    # Every gate of this run asks for a typed answer with its approval, offered prefilled.
    run_id = await start(live, user, "validation", {"entrepreneur_input": IDEA}, gates={"*": {
        "answer_schema": {
            "type": "object", "required": ["budget_usd", "owner_email"],
            "properties": {
                "budget_usd": {"type": "integer", "minimum": 100, "title": "Budget (USD)"},
                "owner_email": {"type": "string", "format": "email"},
                "channel": {"type": "string", "enum": ["email", "phone"]}}},
        "answer_options": {"approve": "required"}}})
    card = page.locator("article.decision", has_text="Approve the founder's brief")
    await expect(card).to_be_visible()
    await expect(card.locator("dl.kv").first).to_be_visible()
    await expect(card.get_by_role("button", name="Approve recommended")).to_contain_text(
        "with the answer")

    await card.get_by_label("Budget (USD)").fill("ten dollars")
    await card.get_by_role("button", name="Approve recommended").click()
    await expect(card.locator(".form-errors")).to_contain_text("budget_usd must be a number")
    await expect(card.get_by_label("Budget (USD)")).to_have_attribute("aria-invalid", "true")
    await card.get_by_label("Budget (USD)").fill("50")
    await card.get_by_role("button", name="Approve recommended").click()
    await expect(card.locator(".form-errors")).to_contain_text("budget_usd must be at least 100")
    await expect(card.locator(".form-errors")).to_contain_text("owner_email is required")
    await card.get_by_label("Owner email").fill("not-an-address")
    await card.get_by_role("button", name="Approve recommended").click()
    await expect(card.locator(".form-errors")).to_contain_text("owner_email must be an email")
    await shot(page, "typed-answer")
    assert not [u for u in posts if "/decisions/" in u], "an invalid answer was sent"
    async with pool.acquire() as conn:
        status = await conn.fetchval("SELECT status FROM hitl_requests WHERE run_id = $1",
                                     uuid.UUID(run_id))
    assert status == "pending"

    await card.get_by_label("Budget (USD)").fill("500")
    await card.get_by_label("Owner email").fill("lead@example.com")
    await card.get_by_role("button", name="Approve recommended").click()
    await expect(card.locator(".form-errors")).to_be_hidden()
    await expect(card.locator(".card-status")).to_contain_text(f"approved: approve by {user}")
    async with pool.acquire() as conn:
        answer = await conn.fetchval(
            "SELECT answer FROM hitl_requests WHERE run_id = $1 AND status = 'approved'",
            uuid.UUID(run_id))
    assert answer == {"budget_usd": 500, "owner_email": "lead@example.com"}
    await page.context.close()


async def test_batch_page_counts_move_while_the_job_runs(browser, live, pool):
    user = f"bo-{uuid.uuid4().hex[:6]}"
    items = [{"text": f"document {i}"} for i in range(40)]
    run_id = await start(live, user, "batch", {
        "name": "summaries", "items": items, "max_workers": 1, "test_first": False,
        "steps": [{"name": "summarize", "template": "Summarize: {{ item.text }}"}]})
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs/{run_id}")
    completed = page.locator("#job-counts dd[data-status=completed]")
    await expect(completed).to_be_visible()
    seen: list[int] = []
    while not seen or seen[-1] < len(items):
        seen.append(int(await completed.inner_text()))
        if len(seen) > 200:
            break
        # A sampling period: the test reads the page's counter over time to see it move.
        await asyncio.sleep(0.1)
    moving = sorted({n for n in seen if 0 < n < len(items)})
    assert len(moving) >= 2, f"counts did not move on the page: {seen}"
    await expect(page.locator("#job-figures")).to_contain_text("40 of 40 done")
    await page.get_by_role("button", name="Open item 0").click()
    await expect(page.locator(".item-detail")).to_contain_text("Summarize: document 0")
    await shot(page, "batch")
    await page.context.close()


async def test_a_user_never_sees_another_users_run_and_csrf_is_required(browser, live, pool):
    me, other = f"cy-{uuid.uuid4().hex[:6]}", f"dx-{uuid.uuid4().hex[:6]}"
    mine = await new_validation_run(pool, owner=me, project_id="mine")
    theirs = await new_validation_run(pool, owner=other, project_id="theirs")
    page = await signed_in_page(browser, live, pool, me)
    await open_gate(pool, theirs.run_id, title="Their secret decision")
    await open_gate(pool, mine.run_id, title="My own decision")
    await expect(page.locator("article.decision", has_text="My own decision")).to_be_visible()
    theirs_card = page.locator("article.decision", has_text="Their secret decision")
    await expect(theirs_card).to_have_count(0)

    await page.goto(f"{live.url}/#/runs")
    await expect(page.locator(f"tr[data-run-id='{mine.run_id}']")).to_be_visible()
    await expect(page.locator(f"tr[data-run-id='{theirs.run_id}']")).to_have_count(0)
    await page.get_by_label("Waiting for a human").check()
    await expect(page.locator(f"tr[data-run-id='{mine.run_id}']")).to_be_visible()
    await shot(page, "runs")

    # The group filter offers the user's groups and shows only the chosen group's runs.
    group_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_group(conn, group_id=group_id, name="Wedding planners", creator=me)
        await conn.execute("UPDATE runs SET group_id = $1 WHERE id = $2", group_id,
                           mine.run_id)
    solo = await new_validation_run(pool, owner=me)
    await page.goto(f"{live.url}/#/")
    await page.goto(f"{live.url}/#/runs")
    await expect(page.locator(f"tr[data-run-id='{solo.run_id}']")).to_be_visible()
    await page.get_by_label("Group").select_option(label="Wedding planners")
    await expect(page.locator(f"tr[data-run-id='{solo.run_id}']")).to_have_count(0)
    await expect(page.locator(f"tr[data-run-id='{mine.run_id}']")).to_be_visible()
    await page.goto(f"{live.url}/#/runs/{theirs.run_id}")
    await expect(page.get_by_role("heading", name="Run not found")).to_be_visible()

    # A change sent with the cookie but without the CSRF header is refused.
    answer = await page.evaluate("""async (path) => {
        const r = await fetch(path, {method: "POST", credentials: "same-origin"});
        return [r.status, await r.json()];
    }""", f"/runs/{mine.run_id}/cancel")
    assert answer[0] == 403 and answer[1]["error"]["code"] == "csrf_failed"
    await page.context.close()


async def test_mobile_run_page_and_a_phone_width_inbox(browser, live, pool):
    user = f"mo-{uuid.uuid4().hex[:6]}"
    run_id = await start(live, user, "mobile_agent", {
        "app_package": "com.waystation.sample.notes", "driver": "simulator", "max_steps": 12,
        "sensitive_actions": "skip"})
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs/{run_id}")
    await expect(page.locator("#steps img").first).to_be_visible()
    await expect(page.locator("#coverage dl.kv").first).to_be_visible()
    await expect(page.locator("h1 .badge")).to_have_text("completed")
    # The graph picture, framed from the same origin (it refuses any other framer).
    await expect(page.frame_locator("iframe.graph").locator("svg").first).to_be_visible()
    await shot(page, "mobile")

    phone = await signed_in_page(browser, live, pool, user, viewport=PHONE)
    run = await new_validation_run(pool, owner=user)
    await open_gate(pool, run.run_id, title="Approve on the go", context={
        "founders_brief": {"problem": "Offices run out of coffee", "customers": ["offices"]}})
    await expect(phone.locator("article.decision")).to_be_visible()
    await shot(phone, "inbox-phone")
    await page.context.close()
    await phone.context.close()


async def test_a_kind_the_console_does_not_know_gets_the_generic_run_page(browser, live, pool):
    user = f"gx-{uuid.uuid4().hex[:6]}"
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="survey", owner=user, group_id=None,
                         workflow_id=f"survey-{run_id}", idempotency_key=None,
                         input={"question": "Which coffee do offices reorder?"})
        await apply_write(conn, ReadModelWrite(
            run_id=run_id, run=RunStateWrite(status="running", current_phase=1,
                                             phase_name="asking"),
            snapshots=[SnapshotWrite(step_ordinal=1, label="asked", phase=1,
                                     state={"answers": 3, "top": "espresso"})],
            events=[EventWrite(event_key="s", type="survey.started", status="running"),
                    EventWrite(event_key="p", type="phase.started", phase=1,
                               progress_pct=10)]))
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs/{run_id}")
    await expect(page.locator("table.events")).to_contain_text("survey.started")
    await expect(page.locator(".phase", has_text="Phase 1")).to_contain_text("running")
    # Live: a new event type and a new snapshot show up without a reload.
    await append_events(pool, run_id, [EventWrite(
        event_key="a", type="survey.answered", phase=1, progress_pct=60,
        output={"note": "fourth answer", "cost_usd": 0.25})])
    async with pool.acquire() as conn:
        await apply_write(conn, ReadModelWrite(run_id=run_id, snapshots=[SnapshotWrite(
            step_ordinal=2, label="answered", phase=1,
            state={"answers": 4, "top": "espresso", "runner_up": "flat white"})], events=[
            EventWrite(event_key="c", type="phase.completed", phase=1, progress_pct=100)]))
    await expect(page.locator("table.events")).to_contain_text("fourth answer")
    await expect(page.locator(".timeline-facts")).to_contain_text("$0.25 reported")
    await expect(page.locator(".diff")).to_contain_text("runner_up")
    await expect(page.get_by_role("progressbar", name="Run progress")).to_have_attribute(
        "aria-valuenow", "100")
    await shot(page, "generic-kind")
    await page.context.close()


async def test_retry_failed_items_starts_a_new_job_from_the_batch_page(browser, live, pool):
    user = f"rf-{uuid.uuid4().hex[:6]}"
    # The second item lacks the field the template reads: it fails, for good.
    run_id = await start(live, user, "batch", {
        "name": "half broken", "items": [{"text": "fine"}, {"other": 1}], "test_first": False,
        "steps": [{"name": "summarize", "template": "Summarize: {{ item.text }}"}]})
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs/{run_id}")
    retry = page.get_by_role("button", name="Retry 1 failed item")
    await expect(retry).to_be_visible()
    await retry.click()
    await expect(page.get_by_role("heading", name="Job: half broken (retry)")).to_be_visible()
    assert run_id not in page.url
    await page.context.close()


async def test_a_named_agent_run_shows_its_summary_and_related_entities(browser, live, pool):
    """Seed 003: where a member coming back looks first, the run page, shows the run's name,
    the summary the agent re-primes from and the vendors it keeps."""
    user = f"sd-{uuid.uuid4().hex[:6]}"
    run_id, group_id = uuid.uuid4(), uuid.uuid4()
    async with pool.acquire() as conn:
        await create_group(conn, group_id=group_id, name="Priya's wedding", creator=user)
        await create_run(conn, run_id=run_id, kind="agent", owner=user, group_id=group_id,
                         workflow_id=f"agent-{run_id}", idempotency_key=None,
                         input={"agent": "planner"}, name="venue booking")
        await apply_write(conn, ReadModelWrite(run_id=run_id, run=RunStateWrite(
            status="paused", current_phase=2, phase_name="waiting for a message",
            context_summary="need: a rustic venue in Bangalore; shortlist: Old Mill Barn",
            related_entity_ids={"vendor_ids": ["v-venue-02", "v-venue-03"]})))
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs/{run_id}")
    facts = page.locator("dl.facts")
    await expect(facts).to_contain_text("venue booking")
    await expect(facts).to_contain_text("shortlist: Old Mill Barn")
    await expect(facts.locator("ul.related")).to_contain_text("vendor_ids: v-venue-02, v-venue-03")
    await shot(page, "agent-related-entities")
    await page.context.close()
