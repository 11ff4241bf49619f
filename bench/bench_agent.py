"""Per-turn overhead of the durable `agent` run kind beside the same agent run in-process.

Both sides run the bundled planner (seed 003) with its offline `FunctionModel` on the same
conversations of three messages (a search, a shortlist, an availability check: one tool call
each). A turn is what AgentRun does with a message: the agent's run (model request, tool call,
model request) and the summary request.

- Durable: each conversation is a fresh AgentRun on a Temporal dev server with the real read
  model in PostgreSQL (each model request and tool call an activity; the turn's events, state
  and snapshot written). A turn is timed from the `post_message` Update to the commit of its
  `agent.answered` event, seen as a person would see it: by the events' NOTIFY (what the SSE
  stream wakes on). Starting the run, and waiting for it to accept the next message, are not
  timed.
- In-process: `planner.run` twice a turn, the conversation's history carried in memory.

So that the figure does not depend on the machine's load of the moment or on how many turns
are run: every conversation is the same length (the history, and so each request, stays the
same size), the two sides take turns (a durable turn, then the same turn in-process, so a
load spike hits both), the first conversations are a warm-up, and the measured turns are
split into rounds whose p50s are printed as a spread.

    python -m bench.bench_agent --turns 300 --rounds 5 [--breakdown]

`--breakdown` then reads the measured conversations' workflow histories and prints where a
durable turn's time goes (bench.agent_breakdown), beside the dev server's floor for one empty
regular and one empty local activity, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field

import asyncpg
from pydantic_ai.messages import ModelMessage
from temporalio.client import Client, WorkflowHandle

from bench import agent_breakdown
from bench.bench_validation import bench_database, bench_temporal, log
from bench.common import markdown_table, percentile, ratio
from bench.peer_agent import MESSAGES
from waystation.activities.agents import backend_named
from waystation.contracts.events import AGENT_ANSWERED
from waystation.kinds.agent.contracts import SUMMARY_PROMPT
from waystation.kinds.agent.kind import AGENT
from waystation.kinds.agent.models import AgentInput, AgentRunInput, MessageInput
from waystation.kinds.agent.planner.agent import planner
from waystation.kinds.agent.workflow import AgentRun
from waystation.persistence.db import create_pool
from waystation.persistence.runs import create_run
from waystation.worker import build_worker

WARM_UP_CONVERSATIONS = 3
EVENTS_CHANNEL = "waystation_events"


@dataclass
class Samples:
    durable: list[float] = field(default_factory=list)
    in_process: list[float] = field(default_factory=list)
    workflow_ids: list[str] = field(default_factory=list)


class Answers:
    """Wakes when a run's `agent.answered` events are committed (the events' NOTIFY); many
    conversations may wait at once (the peers benchmark's runs/s)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._wake: dict[str, asyncio.Event] = {}

    def on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        wake = self._wake.get(json.loads(payload)["run_id"])
        if wake is not None:
            wake.set()

    async def answered(self, run_id: uuid.UUID, count: int) -> None:
        """Until the run has answered `count` messages."""
        wake = self._wake.setdefault(str(run_id), asyncio.Event())
        try:
            while True:
                wake.clear()  # before the read: a commit after it wakes the wait below
                async with self._pool.acquire() as conn:
                    answered = await conn.fetchval(
                        "SELECT count(*) FROM run_events WHERE run_id = $1 AND type = $2",
                        run_id, AGENT_ANSWERED)
                if answered >= count:
                    return
                await wake.wait()
        finally:
            self._wake.pop(str(run_id), None)


async def timed(step: Awaitable[None]) -> float:
    started = time.perf_counter()
    await step
    return (time.perf_counter() - started) * 1000


class Conversation:
    """One conversation on both sides: a fresh AgentRun, and a fresh in-memory history."""

    def __init__(self, run_id: uuid.UUID, handle: WorkflowHandle, answers: Answers) -> None:
        self._run_id, self._handle, self._answers = run_id, handle, answers
        self._history: list[ModelMessage] = []
        self._turns = 0

    @classmethod
    async def start(cls, client: Client, pool: asyncpg.Pool, queue: str,
                    answers: Answers) -> Conversation:
        run_id, run_input = uuid.uuid4(), AgentInput()
        async with pool.acquire() as conn:
            await create_run(conn, run_id=run_id, kind="agent", owner="bench", group_id=None,
                             workflow_id=AGENT.workflow_id(run_id), idempotency_key=None,
                             input=run_input.model_dump(mode="json"))
        handle = await client.start_workflow(
            AgentRun.run, AgentRunInput(run_id=run_id, owner="bench", input=run_input),
            id=AGENT.workflow_id(run_id), task_queue=queue)
        return cls(run_id, handle, answers)

    @property
    def handle(self) -> WorkflowHandle:
        return self._handle

    async def waiting_for_message(self, poll: float = 0.002) -> None:
        # Not timed: only so that the next message is not refused as arriving too early.
        while True:
            if (await self._handle.query(AgentRun.state)).waiting_for == "message":
                return
            await asyncio.sleep(poll)

    async def durable_turn(self, text: str) -> None:
        await self._handle.execute_update(AgentRun.post_message,
                                          MessageInput(text=text, sent_by="bench"))
        self._turns += 1
        await self._answers.answered(self._run_id, self._turns)

    async def in_process_turn(self, text: str) -> None:
        result = await planner.run(text, message_history=self._history)
        self._history = result.all_messages()
        await planner.run(SUMMARY_PROMPT, message_history=self._history)

    async def end(self, poll: float = 0.002) -> None:
        await self.waiting_for_message(poll)  # idle, so nothing is cut off mid-task
        await self._handle.terminate("conversation over")


async def conversations(client: Client, pool: asyncpg.Pool, queue: str, answers: Answers,
                        count: int) -> Samples:
    """`count` conversations, the two sides taking turns turn by turn."""
    samples = Samples()
    for _ in range(count):
        conversation = await Conversation.start(client, pool, queue, answers)
        samples.workflow_ids.append(conversation.handle.id)
        for message in MESSAGES:
            await conversation.waiting_for_message()
            samples.durable.append(await timed(conversation.durable_turn(message)))
            samples.in_process.append(await timed(conversation.in_process_turn(message)))
        await conversation.end()
    return samples


async def measure(turns: int, rounds: int, address: str | None,
                  breakdown: bool = False) -> tuple[list[Samples], str]:
    per_round = max(1, turns // len(MESSAGES) // rounds)
    async with bench_database() as url, bench_temporal(address, "default") as client:
        pool = await create_pool(url, max_size=10)
        listener = await asyncpg.connect(url)
        answers = Answers(pool)
        await listener.add_listener(EVENTS_CHANNEL, answers.on_notify)
        queue = f"bench-agent-{uuid.uuid4().hex[:8]}"
        try:
            async with build_worker(client, pool, task_queue=queue,
                                    backend=backend_named("offline")):
                log(f"warm-up: {WARM_UP_CONVERSATIONS} conversations")
                await conversations(client, pool, queue, answers, WARM_UP_CONVERSATIONS)
                results = []
                for number in range(rounds):
                    log(f"round {number + 1}/{rounds}: {per_round} conversations "
                        f"({per_round * len(MESSAGES)} turns a side)")
                    results.append(await conversations(client, pool, queue, answers,
                                                       per_round))
            if not breakdown:
                return results, ""
            log("breakdown: reading the histories, then the server's floor")
            turns_seen = await agent_breakdown.history_turns(
                client, [w for r in results for w in r.workflow_ids])
            floor = await agent_breakdown.floor_ms(client)
            return results, agent_breakdown.report(turns_seen, floor)
        finally:
            await listener.close()
            await pool.close()


def report(results: list[Samples]) -> str:
    ours = [s for r in results for s in r.durable]
    baseline = [s for r in results for s in r.in_process]
    rows = []
    for label, pick in (("p50", statistics.median), ("p99", lambda s: percentile(s, 99))):
        rows.append([f"per turn, {label}", f"{pick(ours):.1f} ms", f"{pick(baseline):.2f} ms",
                     ratio(pick(ours), pick(baseline))])
    spread = [[f"round p50s ({len(results)} rounds)",
               "–".join(f"{f(statistics.median(r.durable) for r in results):.1f}"
                        for f in (min, max)) + " ms",
               "–".join(f"{f(statistics.median(r.in_process) for r in results):.2f}"
                        for f in (min, max)) + " ms", ""]]
    table = markdown_table(["figure", "durable (AgentRun)", "in-process", "ratio"],
                           rows + spread, [False, True, True, True])
    overhead = statistics.median(ours) - statistics.median(baseline)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{table}\n\ndurable overhead per turn (p50 difference): {overhead:.1f} ms over "
            f"{len(ours)} turns a side (3 model requests and 1 tool call a turn); "
            f"load average at the end: {load}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300, help="measured turns a side")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--temporal-address", help="an existing server (default: start one)")
    parser.add_argument("--breakdown", action="store_true",
                        help="then print where a durable turn's time goes (from the histories)")
    args = parser.parse_args()
    log(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    results, breakdown = asyncio.run(measure(args.turns, args.rounds, args.temporal_address,
                                             args.breakdown))
    print(report(results))
    if breakdown:
        print(f"\n{breakdown}")


if __name__ == "__main__":
    main()
