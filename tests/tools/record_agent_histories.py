"""Record AgentRun histories for the replay test: `python -m tests.tools.record_agent_histories`.

Runs the offline planner on the time-skipping server with the real read model and writes
tests/histories/agent_<case>.json. Only the expired-approval path records so far: the
conversation and continue-as-new cases hung in the recorder (see the issue-12 report).
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from tests.agent_helpers import (
    AVAILABILITY,
    BOOK,
    LIKE,
    SEARCH,
    decide,
    new_agent_run,
    say,
    start_agent,
    waiting,
    waiting_recorded,
)
from tests.tools import history_recording
from tests.tools.history_recording import Case
from waystation.activities.agents import backend_named
from waystation.contracts.decision_policies import PolicyDecision
from waystation.kinds.agent.models import AgentCarry
from waystation.persistence.policies import PolicyVersion, create_policy
from waystation.registry import load_registry

TASK_QUEUE = "record-agent-histories"


async def _end(env: WorkflowEnvironment, handle: WorkflowHandle, turn: int) -> WorkflowHandle:
    """The current run's handle; its idle timeout ends it, so the recorder gets a finished
    history."""
    await waiting(handle, turn=turn)
    run_id = (await handle.describe()).run_id
    return env.client.get_workflow_handle(handle.id, run_id=run_id)


async def approval_expires(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    arg = await new_agent_run(pool, message="Book Banyan Courtyard on 2027-03-01 for 90 guests",
                              approval_timeout_seconds=3600, idle_timeout_seconds=3600)
    handle = await start_agent(env.client, arg, TASK_QUEUE)
    await waiting(handle, "approval")
    await env.sleep(timedelta(hours=2))
    return await _end(env, handle, 1)


async def fork_after_turn(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """A fork (POST /runs/{id}/fork) after a source's first turn: it names its source,
    answers the next message as turn 2 re-primed from the summary, then idles out."""
    arg = await new_agent_run(pool, idle_timeout_seconds=3600)
    source = {"run_id": str(uuid.uuid4()), "snapshot": 3, "checkpoint": None, "decision": None}
    fork = arg.model_copy(update={"forked_from": source, "carry": AgentCarry(
        turn=1, context_summary="Priya plans a team offsite for 90 guests in March.",
        last_answer="Here are three venues.")})
    handle = await start_agent(env.client, fork, TASK_QUEUE)
    await waiting(handle, turn=1)
    await say(handle, "Make it cheaper")
    handle = await _end(env, handle, 2)
    await env.sleep(timedelta(hours=2))
    return handle


async def langgraph_approved(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """A LangGraph graph's run (examples/langgraph_agent): its first message stops at the
    `interrupt()` gate, approved; the node resumes and runs the tool; the run idles out."""
    arg = await new_agent_run(pool, agent="refunds_graph", message="hello?",
                              idle_timeout_seconds=3600)
    handle = await start_agent(env.client, arg, TASK_QUEUE)
    await waiting(handle, "approval")
    await decide(handle, "approve_issue_refund_1", "approve")
    handle = await _end(env, handle, 1)
    await env.sleep(timedelta(hours=2))
    return handle


async def openai_agents_approved(env: WorkflowEnvironment,
                                 pool: asyncpg.Pool) -> WorkflowHandle:
    """An OpenAI Agents SDK agent's run (examples/openai_agents_agent): its first message stops
    at the `needs_approval` tool's gate, approved, and the tool's activity runs; the second
    asks another refund, edited at its gate, and the tool runs with the edited arguments; the
    run idles out."""
    arg = await new_agent_run(pool, agent="refunds_desk", message="hello?",
                              idle_timeout_seconds=3600)
    handle = await start_agent(env.client, arg, TASK_QUEUE)
    await waiting(handle, "approval")
    await decide(handle, "approve_issue_refund_1", "approve")
    await say(handle, "refund A-2002, 30 EUR")
    await waiting(handle, "approval")
    await decide(handle, "approve_issue_refund_2", "edit",
                 answer={"order_id": "A-2002", "amount_eur": 20, "reason": "partial"})
    handle = await _end(env, handle, 2)
    await env.sleep(timedelta(hours=2))
    return handle


async def planner_local_tools(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """The planner with its catalogue lookups as local tools (issue 31): a search, a shortlist
    and a booking approved (the booking a regular activity after its gate); the run idles
    out."""
    arg = await new_agent_run(pool, message=SEARCH, idle_timeout_seconds=3600)
    handle = await start_agent(env.client, arg, TASK_QUEUE)
    await say(handle, LIKE)
    await say(handle, BOOK)
    await waiting(handle, "approval")
    await decide(handle, "approve_book_vendor_1", "approve")
    handle = await _end(env, handle, 3)
    await env.sleep(timedelta(hours=2))
    return handle


async def approved_result_at_once(env: WorkflowEnvironment,
                                  pool: asyncpg.Pool) -> WorkflowHandle:
    """A booking approved, then one edited: each approved tool's result is written as the tool
    has run, before the model request that reads it (issue 31); the run idles out."""
    arg = await new_agent_run(pool, message=BOOK, idle_timeout_seconds=3600)
    handle = await start_agent(env.client, arg, TASK_QUEUE)
    await waiting(handle, "approval")
    await decide(handle, "approve_book_vendor_1", "approve")
    await say(handle, BOOK)
    await waiting(handle, "approval")
    await decide(handle, "approve_book_vendor_2", "edit",
                 arguments={"vendor_id": "v-venue-03", "date": "2027-02-14", "guests": 180})
    handle = await _end(env, handle, 2)
    await env.sleep(timedelta(hours=2))
    return handle


async def policy_decides(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """Decision policies (issue 42): the run owner's policy approves a booking for 40 guests
    as its gate opens (decided by `policy:small-bookings@1`) and leaves one for 180 to a
    person, who approves it; the run idles out."""
    arg = await new_agent_run(pool, message="Book Rosewood Estate on 2027-02-14 for 40 guests",
                              idle_timeout_seconds=3600)
    async with pool.acquire() as conn:
        await create_policy(conn, policy_id=uuid.uuid4(), name="small-bookings", owner=arg.owner,
                            group_id=None, version=PolicyVersion(
                                kind="agent", checkpoint_name=None, project_id=None,
                                condition='request.tool.name == "book_vendor" && '
                                          "request.tool.args.guests <= 50",
                                decision=PolicyDecision(decision="approve",
                                                        feedback="a small booking"),
                                mode="decide"))
    handle = await start_agent(env.client, arg, TASK_QUEUE)
    await say(handle, "Book Rosewood Estate on 2027-02-14 for 180 guests")
    await waiting(handle, "approval")
    await decide(handle, "approve_book_vendor_2", "approve")
    handle = await _end(env, handle, 2)
    await env.sleep(timedelta(hours=2))
    return handle


async def message_with_thinking(env: WorkflowEnvironment, pool: asyncpg.Pool) -> WorkflowHandle:
    """Issue 39: each follow-up message's `message.received` written with its turn's
    `thinking` state, and each answer with the run's next write: the wait for the next
    message, and on the last turn (max_turns) the run's end. The third message comes back
    after the return gap, so its write also carries the member's return."""
    arg = await new_agent_run(pool, message=SEARCH, max_turns=3, return_gap_seconds=600,
                              idle_timeout_seconds=3600)
    handle = await start_agent(env.client, arg, TASK_QUEUE)
    await say(handle, LIKE)
    # Read from the database, not queried: no query may be left behind when time is skipped.
    await waiting_recorded(pool, arg.run_id, turn=2)
    await env.sleep(timedelta(minutes=20))
    await say(handle, AVAILABILITY, by="rohan")
    return handle


CASES: dict[str, Case] = {
    "approval_expires": approval_expires,
    "fork_after_turn": fork_after_turn,
    "langgraph_approved": langgraph_approved,
    "openai_agents_approved": openai_agents_approved,
    "planner_local_tools": planner_local_tools,
    "approved_result_at_once": approved_result_at_once,
    "policy_decides": policy_decides,
    "message_with_thinking": message_with_thinking,
}


def main(argv: list[str] | None = None) -> int:
    # The installed plug-ins' agents (langgraph_approved's graph, openai_agents_approved's
    # agent), before the worker is built.
    load_registry()
    return history_recording.main(
        argv, description=__doc__.splitlines()[0], prefix="agent", cases=CASES,
        task_queue=TASK_QUEUE, backend=backend_named("offline"))


if __name__ == "__main__":
    raise SystemExit(main())
