"""A blocking A2A `SendMessage`, timed from the task needing input to the answer.

    python -m bench.bench_a2a [--calls 50]

One local stack as `waystation up` runs it (`waystation.testing.local_stack(processes=True)`:
embedded PostgreSQL, a Temporal dev server, `waystation worker` with the offline backend and
`waystation api`, each its own process) with the production SSE heartbeat (15 s), so an answer
that waited for a heartbeat instead of the run's status notice shows as 15 s.

Each call is a blocking `SendMessage` through the `a2a-sdk` client with a new `messageId`,
starting an agent run that stops at input-required (its answer to a venue search). Timed: from
the run row's status change to `paused` (`runs.updated_at`, written by the same transaction;
the database's clock, on this machine) to the client holding the answer (time.time()). The
baseline, in the same sitting: a REST `GET /runs/{id}` of the same run right after, timed from
the request to its answer (what any read costs through the same API).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from bench.common import markdown_table, percentile
from waystation.testing import local_stack

SEARCH = "Hi, I need a wedding venue in Bangalore for 200 guests, rustic style"
HEARTBEAT_SECONDS = 15.0


async def bench(calls: int) -> None:
    async with local_stack(processes=True, sse_heartbeat_seconds=HEARTBEAT_SECONDS) as stack, \
            stack.client("bench-a2a") as http:
        card = await A2ACardResolver(http, stack.url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        answers: list[float] = []
        reads: list[float] = []
        started: list[str] = []
        for _ in range(calls):
            request = SendMessageRequest(message=Message(
                message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=SEARCH)]))
            [response] = [r async for r in client.send_message(request)]
            answered = time.time()
            task = response.task
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task.status
            started.append(task.id)
            async with stack.pool.acquire() as conn:
                paused = await conn.fetchval("SELECT updated_at FROM runs WHERE id = $1",
                                             uuid.UUID(task.id))
            answers.append(answered - paused.timestamp())
            began = time.perf_counter()
            (await http.get(f"/runs/{task.id}")).raise_for_status()
            reads.append(time.perf_counter() - began)
        for task_id in started:
            await client.cancel_task(CancelTaskRequest(id=task_id))
        await client.close()

    rows = [["blocking SendMessage: input-required → answer", *_figures(answers)],
            ["baseline: REST GET /runs/{id}, request → answer", *_figures(reads)]]
    print(markdown_table(["measure", "p50", "p99", "max", "n"], rows,
                         right=[False, True, True, True, True]))


def _figures(seconds: list[float]) -> list[str]:
    return [*(f"{percentile(seconds, pct) * 1000:.1f} ms" for pct in (50, 99)),
            f"{max(seconds) * 1000:.1f} ms", str(len(seconds))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(bench(args.calls))


if __name__ == "__main__":
    main()
