"""AgentRun on the time-skipping server, with the real read model and the offline planner."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from tests.agent_helpers import (
    BOOK,
    FOLLOW_UP,
    LIKE,
    NATURAL,
    SEARCH,
    decide,
    events_of,
    new_agent_run,
    say,
    start_agent,
    waiting,
)
from waystation.contracts.refusals import INVALID_ANSWER, NOT_WAITING_FOR_MESSAGE
from waystation.kinds.agent.models import MessageInput
from waystation.kinds.agent.workflow import AgentRun


async def test_approve_reject_with_feedback_and_edit(time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, message=SEARCH)
    handle = await start_agent(time_env.client, arg, task_queue)
    await say(handle, LIKE)
    await say(handle, BOOK)
    await waiting(handle, "approval")
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(AgentRun.post_message, MessageInput(text="hi", sent_by="x"))
    assert isinstance(refused.value.cause, ApplicationError)
    assert refused.value.cause.type == NOT_WAITING_FOR_MESSAGE
    # Rejected with feedback: the model is told and answers.
    await decide(handle, "approve_book_vendor_1", "reject", feedback="wait for the budget")
    state = await waiting(handle, turn=3)
    assert state.last_answer == "I did not book vendor: wait for the budget"
    # Edited: a bad argument is refused naming the field; the good edit runs the tool.
    await say(handle, BOOK)
    await waiting(handle, "approval")
    with pytest.raises(WorkflowUpdateFailedError) as bad:
        await decide(handle, "approve_book_vendor_2", "edit",
                     arguments={"vendor_id": "v-venue-03", "date": "2027-02-14",
                                "guests": "many"})
    assert bad.value.cause.type == INVALID_ANSWER
    assert bad.value.cause.message.startswith("answer.guests:")
    await decide(handle, "approve_book_vendor_2", "edit",
                 arguments={"vendor_id": "v-venue-03", "date": "2027-02-14", "guests": 180})
    state = await waiting(handle, turn=4)
    assert state.last_answer.startswith("Booked Rosewood Estate for 180 guests")
    # Approved as asked.
    await say(handle, "Book Banyan Courtyard on 2027-03-01 for 200 guests")
    await waiting(handle, "approval")
    await decide(handle, "approve_book_vendor_3", "approve")
    state = await waiting(handle, turn=5)
    assert state.last_answer.startswith("Booked Banyan Courtyard for 200 guests")
    events = await events_of(pool, arg.run_id)
    decided = [e.output for e in events if e.type == "gate.decided"]
    assert [d["decision"] for d in decided] == ["reject", "edit", "approve"]
    assert decided[1]["answer"]["guests"] == 180
    returned = [e.output["result"] for e in events if e.type == "tool.returned"
                and e.output["tool"] == "book_vendor"]
    assert len(returned) == 3 and returned[0] == {"return_value": "wait for the budget"}
    assert "booked: Banyan Courtyard on 2027-03-01" in state.context_summary
    await handle.terminate("done")


async def test_unanswered_approval_expires_and_the_model_is_told(time_env, pool, worker,
                                                                 task_queue):
    arg = await new_agent_run(pool, message=BOOK.replace("Rosewood", "Banyan Courtyard"
                                                        ).replace(" Estate", ""),
                              approval_timeout_seconds=3600)
    handle = await start_agent(time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    await time_env.sleep(timedelta(hours=2))
    state = await waiting(handle, turn=1)
    assert "nobody approved book_vendor in time" in state.last_answer
    events = await events_of(pool, arg.run_id)
    assert [e.output["policy"] for e in events if e.type == "gate.expired"] == ["default"]
    await handle.terminate("done")


async def test_long_conversation_continues_as_new_re_primed_from_its_summary(
        time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, message=SEARCH, history_budget=50, keep_recent_turns=0)
    handle = await start_agent(time_env.client, arg, task_queue)
    await say(handle, LIKE)
    await waiting(handle, turn=2)
    # Past the budget, with no recent turns kept: the shortlist lives on in the summary only.
    await say(handle, "Which are available on 2027-02-14?", by="rohan")
    state = await waiting(handle, turn=3)
    assert state.continued >= 1
    assert "taken: Old Mill Barn" in state.last_answer
    events = await events_of(pool, arg.run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.event_key for e in events}) == len(events)
    await handle.terminate("done")


async def test_a_model_calling_an_unknown_tool_is_told_and_carries_on(
        time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, message=SEARCH)
    handle = await start_agent(time_env.client, arg, task_queue)
    await say(handle, LIKE)
    await say(handle, "Compare them for me")
    state = await waiting(handle, turn=3)
    assert state.last_answer.startswith("I could not use compare_vendors")
    events = await events_of(pool, arg.run_id)
    told = [e.output for e in events if e.type == "tool.retry"]
    assert told == [{"turn": 3, "tool": "compare_vendors", "call_id": told[0]["call_id"],
                     "told": told[0]["told"]}]
    assert "Unknown tool name: 'compare_vendors'" in told[0]["told"]
    assert state.usage.requests == 9
    await handle.terminate("done")


async def test_a_natural_request_is_searched_shortlisted_and_booked_after_approval(
        time_env, pool, worker, task_queue):
    """Seed 003's request in one message: the offline planner searches with the stated city,
    guests, budget and style, shortlists three, checks them and asks to book the best that is
    free (the approval gate); approved, the booking runs."""
    arg = await new_agent_run(pool, message=NATURAL)
    handle = await start_agent(time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    calls = [e.output for e in await events_of(pool, arg.run_id) if e.type == "tool.called"]
    assert [c["tool"] for c in calls] == ["search_vendors", "shortlist", "check_availability",
                                          "book_vendor"]
    assert calls[0]["arguments"] == {"category": "venue", "city": "Bangalore", "style": "rustic",
                                     "min_capacity": 200, "max_price": 1_500_000}
    assert calls[1]["arguments"]["vendor_ids"] == ["v-venue-02", "v-venue-01", "v-venue-03"]
    # Old Mill Barn is the cheapest but taken that day: the best free one is asked for.
    assert calls[3]["arguments"] == {"vendor_id": "v-venue-01", "date": "2027-02-14",
                                     "guests": 200}
    await decide(handle, "approve_book_vendor_1", "approve")
    state = await waiting(handle, turn=1)
    assert "Shortlisted Old Mill Barn, Banyan Courtyard, Rosewood Estate" in state.last_answer
    assert "Booked Banyan Courtyard for 200 guests on 2027-02-14" in state.last_answer
    await handle.terminate("done")


async def test_a_request_lacking_what_to_look_for_is_answered_with_what_is_needed(
        time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, message="Shortlist three and book the best one.")
    handle = await start_agent(time_env.client, arg, task_queue)
    state = await waiting(handle, turn=1)
    assert state.last_answer.startswith("There is nothing to shortlist yet: tell me what to look")
    assert not [e for e in await events_of(pool, arg.run_id) if e.type == "tool.called"]
    await handle.terminate("done")


async def test_a_question_about_the_plan_is_answered_from_the_conversation_not_booked(
        time_env, pool, worker, task_queue):
    """The follow-up of issue 43: asked which were shortlisted and whether the booking is
    confirmed, the planner answers from what the conversation did, calls no tool and opens no
    approval, before the booking and after it."""
    arg = await new_agent_run(pool, message=NATURAL)
    handle = await start_agent(time_env.client, arg, task_queue)
    await waiting(handle, "approval")
    await decide(handle, "approve_book_vendor_1", "approve")
    await waiting(handle, turn=1)
    calls = len([e for e in await events_of(pool, arg.run_id) if e.type == "tool.called"])
    await say(handle, FOLLOW_UP)
    state = await waiting(handle, turn=2)
    assert state.last_answer.startswith(
        "I shortlisted Old Mill Barn (v-venue-02), Banyan Courtyard (v-venue-01), Rosewood "
        "Estate (v-venue-03). The booking is confirmed: Banyan Courtyard on 2027-02-14 (bk-")
    events = await events_of(pool, arg.run_id)
    assert len([e for e in events if e.type == "tool.called"]) == calls
    assert len([e for e in events if e.type == "gate.opened"]) == 1
    await handle.terminate("done")


async def test_a_question_before_any_booking_says_nothing_is_booked(time_env, pool, worker,
                                                                     task_queue):
    arg = await new_agent_run(pool, message=SEARCH)
    handle = await start_agent(time_env.client, arg, task_queue)
    await say(handle, "Shortlist the first three")
    await say(handle, FOLLOW_UP)
    state = await waiting(handle, turn=3)
    assert state.last_answer == ("I shortlisted Old Mill Barn (v-venue-02), Banyan Courtyard "
                                 "(v-venue-01), Rosewood Estate (v-venue-03). Nothing is booked "
                                 "yet: tell me which vendor to book, and for when.")
    calls = [e.output["tool"] for e in await events_of(pool, arg.run_id)
             if e.type == "tool.called"]
    assert calls == ["search_vendors", "shortlist"]
    # Asked as a request, even one that ends with a question mark, it books (at its gate).
    await say(handle, "Can you book Rosewood Estate on 2027-02-14 for 200 guests?")
    await waiting(handle, "approval")
    await handle.terminate("done")
