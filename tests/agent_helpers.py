"""Helpers for the agent-run tests: runs, waiting for a turn or a gate, the transcript."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from tests.helpers import eventually
from tests.openai_stub import CallTool, Reply
from waystation.kinds.agent.kind import AGENT
from waystation.kinds.agent.models import AgentInput, AgentRunInput, MessageInput
from waystation.kinds.agent.workflow import AgentRun
from waystation.persistence import events as events_repo
from waystation.persistence import runs as runs_repo
from waystation.persistence.runs import create_run
from waystation.workflows.gate_rules import DecisionInput

SEARCH = "Hi, I need a wedding venue in Bangalore for 200 guests, rustic style"
LIKE = "I like Old Mill Barn, Rosewood Estate and Banyan Courtyard. Let me think about it."
AVAILABILITY = "Welcome back to me. Which of them are available on 2027-02-14?"
BOOK = "Book Rosewood Estate on 2027-02-14 for 200 guests"
# Issue 43's follow-up: a question about the booking, not a request to book.
FOLLOW_UP = "Which three did you shortlist, and is the booking confirmed?"
# A refunds agent's request (the LangGraph and OpenAI Agents examples).
LAMP = "My lamp A-7007 broke"
# Seed 003's request as a person writes it, all steps in one message.
NATURAL = ("We need a rustic wedding venue in Bangalore for 200 guests, under 15 lakh. "
           "Shortlist three and book the best one.")


async def new_agent_run(pool: asyncpg.Pool, owner: str = "priya",
                        **fields: Any) -> AgentRunInput:
    run_id = uuid.uuid4()
    run_input = AgentInput(**fields)
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="agent", owner=owner, group_id=None,
                         workflow_id=AGENT.workflow_id(run_id), idempotency_key=None,
                         input=run_input.model_dump(mode="json"))
    return AgentRunInput(run_id=run_id, owner=owner, input=run_input)


async def start_agent(client: Client, arg: AgentRunInput, task_queue: str) -> WorkflowHandle:
    """The run's handle by workflow id alone, so it follows the run across continue-as-new."""
    await client.start_workflow(AgentRun.run, arg, id=AGENT.workflow_id(arg.run_id),
                                task_queue=task_queue)
    return client.get_workflow_handle(AGENT.workflow_id(arg.run_id))


async def waiting(handle: WorkflowHandle, what: str = "message", turn: int | None = None,
                  timeout: float = 30.0) -> Any:  # noqa: ASYNC109
    async def check() -> Any:
        try:
            state = await handle.query(AgentRun.state, rpc_timeout=timedelta(seconds=5))
        except RPCError:
            # Just after a continue-as-new the new run answers once its first task has run;
            # on a loaded machine that can outlast one query's deadline. Ask again. (A query
            # given up on leaves the time-skipping server refusing to skip time: a test that
            # sleeps days has a server of its own, `own_time_env`.)
            return None
        return state if state.waiting_for == what and (turn is None or state.turn == turn) \
            else None
    return await eventually(check, timeout=timeout)


async def refund_approved(pool: asyncpg.Pool, client: Client, task_queue: str,
                          agent: str) -> tuple[AgentRunInput, WorkflowHandle, Any]:
    """A refunds agent's run on a broken lamp (order A-7007): its refund's gate approved, and the
    first turn's state once recorded. The model's part is `refund_script`'s."""
    arg = await new_agent_run(pool, agent=agent, message=LAMP)
    handle = await start_agent(client, arg, task_queue)
    await waiting(handle, "approval")
    await decide(handle, "approve_issue_refund_1", "approve")
    return arg, handle, await waiting(handle, turn=1)


def refund_script(answer: str) -> tuple[CallTool, Reply, Reply]:
    """What the stub model says in `refund_approved`'s run: the refund, `answer`, the summary."""
    return (CallTool("issue_refund", {"order_id": "A-7007", "amount_eur": 35, "reason": "broken"}),
            Reply(answer), Reply("One refund: A-7007, 35 EUR."))


async def say(handle: WorkflowHandle, text: str, by: str = "priya") -> Any:
    await waiting(handle, "message")
    return await handle.execute_update(AgentRun.post_message, MessageInput(text=text, sent_by=by))


async def decide(handle: WorkflowHandle, checkpoint: str, decision: str, **fields: Any) -> Any:
    return await handle.execute_update(AgentRun.decide, DecisionInput(
        checkpoint_name=checkpoint, decision=decision, decided_by="rohan", **fields))


async def events_of(pool: asyncpg.Pool, run_id: uuid.UUID) -> list:
    async with pool.acquire() as conn:
        return await events_repo.list_events(conn, run_id, after_seq=0, limit=10_000)


async def waiting_recorded(pool: asyncpg.Pool, run_id: uuid.UUID, turn: int) -> Any:
    """The run's row once it is recorded waiting for a message after `turn`. Read from the
    database, not queried: a test about to skip days must leave no query behind (see
    `waiting`), and the query shows the wait before the local activity writing it is done."""
    async def recorded() -> Any:
        row = await run_row(pool, run_id)
        return row if (row.status, row.current_phase, row.phase_name) == (
            "paused", turn, "waiting for a message") else None
    return await eventually(recorded)


async def run_row(pool: asyncpg.Pool, run_id: uuid.UUID) -> Any:
    async with pool.acquire() as conn:
        return await runs_repo.get_run(conn, run_id)


@asynccontextmanager
async def deltas_heard(pool: asyncpg.Pool) -> AsyncIterator[list[dict[str, Any]]]:
    """Every notice on `waystation_deltas` while the block runs (and a moment after it)."""
    notes: list[dict[str, Any]] = []

    def heard(*args: Any) -> None:
        notes.append(json.loads(args[-1]))

    async with pool.acquire() as listener:
        await listener.add_listener("waystation_deltas", heard)
        try:
            yield notes
            await asyncio.sleep(0.2)  # the last notices reach the listener
        finally:
            await listener.remove_listener("waystation_deltas", heard)


def shown_text(notes: list[dict[str, Any]], message_id: str) -> str:
    """What a client shows of a message's text from its notices: a reset drops what it had."""
    text = ""
    for note in notes:
        if note["message_id"] != message_id:
            continue
        if note.get("reset"):
            text = ""
        elif note.get("call_id") is None:
            text = text[:note["at"]] + note["delta"]
    return text
