"""An agent run's conversation in the console: the messages so far, the agent's answers, and a
box that sends the next message (headless chromium, the real API and a real worker with the
offline planner; the fixtures of test_console_browser)."""

from __future__ import annotations

import uuid

import httpx
from playwright.async_api import Locator, expect

from tests.browser.test_console_browser import (  # noqa: F401 - fixtures
    bearer,
    browser,
    chromium,
    live,
    shot,
    signed_in_page,
    start,
)


async def speakers(conversation: Locator) -> list[str]:
    """Who speaks in each line of the conversation, top to bottom (tool lines left out)."""
    classes = await conversation.locator("li.person, li.agent").evaluate_all(
        "lines => lines.map(li => li.classList.contains('person') ? 'person' : 'agent')")
    return list(classes)


async def test_a_person_converses_with_an_agent_run_from_its_page(browser, live, pool):  # noqa: F811
    user = f"ag-{uuid.uuid4().hex[:6]}"
    run_id = await start(live, user, "agent", {"agent": "planner"})
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs/{run_id}")
    panel = page.locator("section[aria-labelledby='conversation-h']")
    await expect(panel.get_by_text("No messages yet.")).to_be_visible()

    box = page.get_by_label("Your message")
    await box.fill("Hello! What can you do for our wedding?")
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#agent-message-status")).to_have_text(
        "Message 1 sent (turn 1).")
    await expect(box).to_have_value("")
    conversation = page.locator("#conversation")
    await expect(conversation.locator("li.person")).to_contain_text(
        "Hello! What can you do for our wedding?")
    await expect(conversation.locator("li.person")).to_contain_text(user)
    # The planner's answer (it says what it needs to search), written at the turn's end (live
    # while the model writes it: `li.agent.writing`, until the durable answer replaces it).
    await expect(conversation.locator("li.agent:not(.writing)")).to_have_count(1)
    await expect(conversation.locator("li.agent")).to_have_count(1)
    assert (await conversation.locator("li.agent p").inner_text()).strip()
    # In the order of the conversation: the message above its answer, though the answer's
    # first tokens may reach the page before the message is read back.
    assert await speakers(conversation) == ["person", "agent"]
    await shot(page, "agent-conversation")

    # The conversation follows the page's event stream, not a poll: idle, it reads nothing;
    # a message sent elsewhere (the API) shows with its answer.
    reads: list[str] = []
    page.on("request", lambda r: reads.append(r.url) if "/messages" in r.url else None)
    await page.wait_for_timeout(3000)
    assert reads == []
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        sent = await http.post(f"/runs/{run_id}/messages", headers=bearer(user),
                               json={"text": "Find rustic venues in Bangalore"})
    assert sent.status_code == 202, sent.text
    await expect(conversation.locator("li.person")).to_have_count(2)
    await expect(conversation.locator("li.agent:not(.writing)")).to_have_count(2)
    assert await speakers(conversation) == ["person", "agent", "person", "agent"]

    # An empty message is not sent; a run that has ended takes none.
    await page.get_by_role("button", name="Send").click()
    await expect(page.locator("#agent-message-status")).to_have_text("Write a message first.")
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        canceled = await http.post(f"/runs/{run_id}/cancel", headers=bearer(user))
    assert canceled.status_code in (200, 202), canceled.text
    await expect(box).to_be_disabled()
    await expect(page.locator("#agent-message-status")).to_have_text(
        "The run has ended: it takes no more messages.")
    await page.context.close()


async def test_the_answer_grows_in_place_as_the_model_writes_it(browser, live, pool,  # noqa: F811
                                                                monkeypatch):
    """Issue 43: the planner's answer shows as it is written (one line, growing), then is the
    durable answer in the same place; screenshot taken mid-answer."""
    monkeypatch.setenv("WAYSTATION_OFFLINE_TOKEN_MS", "70")  # a slow model: time to look
    user = f"ag-{uuid.uuid4().hex[:6]}"
    run_id = await start(live, user, "agent", {"agent": "planner"})
    page = await signed_in_page(browser, live, pool, user)
    await page.goto(f"{live.url}/#/runs/{run_id}")
    await expect(page.get_by_text("No messages yet.")).to_be_visible()
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        sent = await http.post(f"/runs/{run_id}/messages", headers=bearer(user),
                               json={"text": "Find rustic venues in Bangalore for 200 guests"})
    assert sent.status_code == 202, sent.text
    conversation = page.locator("#conversation")
    writing = conversation.locator("li.agent.writing p")
    await expect(writing).to_contain_text("I found")
    early = await writing.inner_text()
    await shot(page, "agent-answer-mid-stream")
    await expect(conversation.locator("li.agent.writing")).to_have_count(0, timeout=30_000)
    async with httpx.AsyncClient(base_url=live.url, timeout=30) as http:
        said = (await http.get(f"/runs/{run_id}/messages", headers=bearer(user))).json()
    answer = [m["text"] for m in said["messages"] if m["role"] == "agent"][-1]
    await expect(conversation.locator("li.agent")).to_have_count(1)
    assert (await conversation.locator("li.agent p").inner_text()) == answer
    assert answer.startswith(early) and len(early) < len(answer)
    await page.context.close()
