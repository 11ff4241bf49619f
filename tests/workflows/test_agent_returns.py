"""Conversations that wait ten days on the time-skipping server: a member carries on, or
returns after a gap and is re-primed from the summary."""

from __future__ import annotations

from datetime import timedelta

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from tests.agent_helpers import (
    LIKE,
    SEARCH,
    events_of,
    new_agent_run,
    run_row,
    say,
    start_agent,
    waiting,
    waiting_recorded,
)
from tests.workflows.test_agent_workflow import decide


@pytest_asyncio.fixture
async def time_env(own_time_env: WorkflowEnvironment) -> WorkflowEnvironment:
    """Each test here skips days, so each has a server no other test has used."""
    return own_time_env


async def test_conversation_waits_ten_days_and_another_member_carries_on(
        time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, message=SEARCH)
    handle = await start_agent(time_env.client, arg, task_queue)
    await say(handle, LIKE)
    row = await waiting_recorded(pool, arg.run_id, turn=2)
    await time_env.sleep(timedelta(days=10))  # Monday to the Friday after next
    assert "Old Mill Barn (v-venue-02)" in row.context_summary
    await say(handle, "Which of them are available on 2027-02-14?", by="rohan")
    state = await waiting(handle, turn=3)
    assert "free: Banyan Courtyard, Rosewood Estate; taken: Old Mill Barn" in state.last_answer
    events = await events_of(pool, arg.run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.output["sent_by"] for e in events if e.type == "message.received"] == [
        "priya", "priya", "rohan"]
    assert state.usage.requests == 9 and state.usage.input_tokens > 0  # 2 + 1 summary a turn
    # Every model response's usage, the summaries' included, summed once on the run.
    responses = [e.output["usage"] for e in events if e.type == "model.responded"]
    assert len(responses) == 9
    row = await run_row(pool, arg.run_id)
    assert (row.input_tokens, row.output_tokens) == (state.usage.input_tokens,
                                                     state.usage.output_tokens)
    assert row.cost_usd == state.usage.cost_usd == 0  # the offline model is free
    # Not waiting for a message while it works or waits at a gate: refused, nothing recorded.
    await handle.terminate("done")


async def test_a_member_returning_after_ten_days_is_re_primed_and_greeted(
        time_env, pool, worker, task_queue):
    """Seed 003's Friday: Rohan comes back to what Priya shortlisted on Monday. His turn starts
    from the summary and the related entities, not the transcript; the planner greets him."""
    arg = await new_agent_run(pool, message=SEARCH)
    handle = await start_agent(time_env.client, arg, task_queue)
    await say(handle, LIKE)
    await waiting_recorded(pool, arg.run_id, turn=2)
    shortlist = {"v-venue-01", "v-venue-02", "v-venue-03"}
    row = await run_row(pool, arg.run_id)
    assert set(row.related_entity_ids["vendor_ids"]) == shortlist
    await time_env.sleep(timedelta(days=10))
    await say(handle, "Which of them are available on 2027-02-14?", by="rohan")
    state = await waiting(handle, turn=3)
    assert state.returns == 1
    assert state.last_answer.startswith("Welcome back, Rohan! Where things stand: ")
    greeting = state.last_answer.partition(". On ")[0]
    assert "; shortlist: " in greeting and "Old Mill Barn (v-venue-02)" in greeting
    assert "free: Banyan Courtyard, Rosewood Estate; taken: Old Mill Barn" in state.last_answer
    events = await events_of(pool, arg.run_id)
    returned = [e.output for e in events if e.type == "member.returned"]
    assert len(returned) == 1 and returned[0]["sent_by"] == "rohan"
    assert set(returned[0]["related_entity_ids"]["vendor_ids"]) == shortlist
    # Not the transcript: the returning turn's first request saw Rohan's message alone.
    first = {e.phase: e.output["usage"]["input_tokens"] for e in reversed(events)
             if e.type == "model.responded"}
    assert first[3] < first[2] / 4
    # Straight after, no gap: an ordinary turn, no greeting, booked vendor kept once.
    await say(handle, "Book Banyan Courtyard on 2027-03-01 for 200 guests")
    await waiting(handle, "approval")
    await decide(handle, "approve_book_vendor_1", "approve")
    state = await waiting(handle, turn=4)
    assert state.returns == 1 and state.last_answer.startswith("Booked Banyan Courtyard")
    row = await run_row(pool, arg.run_id)
    assert sorted(row.related_entity_ids["vendor_ids"]) == sorted(shortlist)
    await handle.terminate("done")


async def test_without_a_return_gap_a_late_message_carries_the_transcript_on(
        time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, message=SEARCH, return_gap_seconds=None)
    handle = await start_agent(time_env.client, arg, task_queue)
    await say(handle, LIKE)
    await waiting_recorded(pool, arg.run_id, turn=2)
    await time_env.sleep(timedelta(days=10))
    await say(handle, "Which of them are available on 2027-02-14?", by="rohan")
    state = await waiting(handle, turn=3)
    assert state.returns == 0 and state.last_answer.startswith("On 2027-02-14: free:")
    assert not [e for e in await events_of(pool, arg.run_id) if e.type == "member.returned"]
    await handle.terminate("done")
