"""Live model tokens (issue 43): time to first token at the client against the model's own, and
tokens per second to many clients.

    python -m bench.bench_tokens [--answers 20] [--clients 50] [--words 300] [--word-ms 10]

One process holds everything, on one event loop: the model stand-in (tests/openai_stub.py, the
OpenAI chat-completions protocol over real HTTP, streaming a word a chunk `--word-ms` apart),
a worker whose agent runs use it as their configured model, the API under uvicorn, and the
clients; PostgreSQL (embedded) and a Temporal dev server are started for the run. All times
are `time.monotonic()` of this process, so the stand-in's first token and a client's are on
one clock.

1. First token: `--answers` planner turns, one at a time. Each turn's message is sent by an
   AG-UI client (`POST /ag-ui/agent` with the new user message: its response follows the run)
   while an SSE client follows the run's stream (`/runs/{id}/events/stream`). Reported per
   client: p50 / p90 of (the client's first piece of the answer: `TEXT_MESSAGE_CONTENT`, the
   first text `message.delta`) minus (the stand-in sending its first text chunk).
2. Fan-out: `--clients` SSE clients on one run, one answer of `--words` words. Each client's
   words per second from its first piece to its last, and whether each folded the answer
   exactly (no token lost, repeated or reordered).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx

from bench.bench_validation import bench_database, bench_temporal, log
from bench.common import markdown_table, percentile
from tests.agent_helpers import shown_text
from tests.openai_stub import OpenAIStub, Reply
from waystation.activities.agents import backend_named
from waystation.api.auth import issue_token
from waystation.kinds.agent.activities.model import OpenAIModelConfig, use_openai_model
from waystation.persistence.db import create_pool
from waystation.settings import Settings
from waystation.testing import InProcessApi
from waystation.worker import build_worker

SECRET = "bench-tokens-secret-0123456789-0123456789"
ANSWER = ("Old Mill Barn fits: rustic, 220 guests, 9 lakh, free on the day you asked for, "
          "with a garden for the ceremony and a hall for the dinner.")


def sse_lines(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    async def frames() -> AsyncIterator[tuple[str, Any]]:
        event = "message"
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                yield event, json.loads(line[6:])
                event = "message"
    return frames()


async def follow_sse(http: httpx.AsyncClient, run_id: str, after_seq: int,
                     ready: asyncio.Event) -> tuple[float | None, list[dict[str, Any]], float]:
    """(first text delta's time, every delta, the last one's time) until the turn's answer."""
    first, last, deltas = None, 0.0, []
    async with http.stream("GET", f"/runs/{run_id}/events/stream?after_seq={after_seq}") as r:
        ready.set()
        async for event, data in sse_lines(r):
            if event == "message.delta" and data.get("call_id") is None:
                last = time.monotonic()
                first = first or last
                deltas.append(data)
            elif event == "agent.answered":
                return first, deltas, last
    raise RuntimeError("the stream ended before the answer")


async def send_by_ag_ui(http: httpx.AsyncClient, run_id: str, text: str) -> float | None:
    """The time of the first TEXT_MESSAGE_CONTENT of the answer, in the AG-UI response that
    sends `text`."""
    body = {"threadId": run_id, "runId": str(uuid.uuid4()), "state": {}, "tools": [],
            "context": [], "messages": [{"id": str(uuid.uuid4()), "role": "user",
                                         "content": text}]}
    first, answers = None, set()
    async with http.stream("POST", "/ag-ui/agent", json=body) as response:
        async for _, data in sse_lines(response):
            if data.get("type") == "TEXT_MESSAGE_START" and data.get("role") == "assistant":
                answers.add(data["messageId"])  # not the person's own message, sent back
            if data.get("type") == "TEXT_MESSAGE_CONTENT" and first is None \
                    and data["messageId"] in answers:
                first = time.monotonic()
            if data.get("type") in ("RUN_FINISHED", "RUN_ERROR"):
                break
    return first


async def waiting_for_message(http: httpx.AsyncClient, run_id: str) -> int:
    while True:
        run = (await http.get(f"/runs/{run_id}")).json()
        page = (await http.get(f"/runs/{run_id}/messages?limit=500")).json()
        answers = [m for m in page["messages"] if m["type"] == "agent.answered"]
        if run["status"] == "paused" and (answers or run["last_seq"] >= 1):
            return int(run["last_seq"])
        await asyncio.sleep(0.05)


async def first_tokens(http: httpx.AsyncClient, stub: OpenAIStub, answers: int
                       ) -> tuple[list[float], list[float]]:
    sse, ag_ui = [], []
    run_id = (await http.post("/runs", json={"kind": "agent",
                                             "input": {"agent": "planner"}})).json()["run_id"]
    for _ in range(answers):
        after = await waiting_for_message(http, run_id)
        stub.script(Reply(ANSWER), Reply("need: a venue"))
        ready = asyncio.Event()
        following = asyncio.create_task(follow_sse(http, run_id, after, ready))
        await ready.wait()
        before = len(stub.first_tokens)
        agui_first = await send_by_ag_ui(http, run_id, "A rustic venue in Bangalore, please")
        sse_first, _, _ = await following
        model_first = stub.first_tokens[before]
        assert sse_first is not None and agui_first is not None
        sse.append(sse_first - model_first)
        ag_ui.append(agui_first - model_first)
    return sse, ag_ui


async def fan_out(http_for: Any, stub: OpenAIStub, clients: int, words: int
                  ) -> tuple[list[float], int, float]:
    """Each client's words per second, how many folded the answer exactly, the model's words
    per second (its first chunk to its last)."""
    answer = " ".join(f"word{i}" for i in range(words)) + "."
    owner = http_for()
    run_id = (await owner.post("/runs", json={"kind": "agent",
                                              "input": {"agent": "planner"}})).json()["run_id"]
    after = await waiting_for_message(owner, run_id)
    readers = [http_for() for _ in range(clients)]
    readies = [asyncio.Event() for _ in readers]
    follows = [asyncio.create_task(follow_sse(h, run_id, after, r))
               for h, r in zip(readers, readies, strict=True)]
    await asyncio.gather(*(r.wait() for r in readies))
    stub.script(Reply(answer), Reply("need: words"))
    before = len(stub.first_tokens)
    await owner.post(f"/runs/{run_id}/messages", json={"text": "Say it all"})
    results = await asyncio.gather(*follows)
    model_rate = words / (stub.last_tokens[before] - stub.first_tokens[before])
    rates, exact = [], 0
    for first, deltas, done in results:
        ids = {d["message_id"] for d in deltas}
        folded = shown_text(deltas, ids.pop()) if len(ids) == 1 else ""
        exact += folded == answer
        rates.append(words / (done - first) if first is not None and done > first else 0.0)
    for h in [owner, *readers]:
        await h.aclose()
    return rates, exact, model_rate


async def main(args: argparse.Namespace) -> None:
    stub = OpenAIStub(chunk_delay=args.word_ms / 1000)
    await stub.start()
    async with bench_database() as url, bench_temporal(None, "default") as client:
        pool = await create_pool(url, max_size=20)
        task_queue = f"bench-tokens-{uuid.uuid4().hex[:6]}"
        settings = Settings(database_url=url, jwt_secret=SECRET, temporal_task_queue=task_queue,
                            temporal_address=client.service_client.config.target_host)
        use_openai_model(OpenAIModelConfig(base_url=stub.base_url, api_key="k",
                                           model="gpt-4o-mini", timeout_seconds=60))
        api = InProcessApi(settings)
        await api.start()
        headers = {"Authorization": f"Bearer {issue_token(SECRET, 'bench')}"}

        def http_for() -> httpx.AsyncClient:
            return httpx.AsyncClient(base_url=api.url, headers=headers, timeout=120)
        try:
            async with build_worker(client, pool, task_queue=task_queue,
                                    backend=backend_named("offline")):
                async with http_for() as http:
                    log(f"first token: {args.answers} answers")
                    sse, ag_ui = await first_tokens(http, stub, args.answers)
                log(f"fan-out: {args.clients} clients, {args.words} words")
                rates, exact, model_rate = await fan_out(http_for, stub, args.clients,
                                                         args.words)
        finally:
            await api.stop()
            await pool.close()
            await stub.stop()

    def ms(values: list[float], pct: float) -> str:
        return f"{percentile(values, pct) * 1000:.1f} ms"
    print(markdown_table(
        ["client", "answers", "first token after the model's, p50", "p90"],
        [["SSE `message.delta`", str(len(sse)), ms(sse, 50), ms(sse, 90)],
         ["AG-UI `TEXT_MESSAGE_CONTENT`", str(len(ag_ui)), ms(ag_ui, 50), ms(ag_ui, 90)]],
        [False, True, True, True]))
    print()
    print(markdown_table(
        ["SSE clients", "words", "model's words/s", "client words/s p50", "min",
         "answers folded exactly"],
        [[str(args.clients), str(args.words), f"{model_rate:.0f}",
          f"{percentile(rates, 50):.0f}", f"{min(rates):.0f}", f"{exact}/{args.clients}"]],
        [True] * 6))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--word-ms", type=float, default=10.0)
    asyncio.run(main(parser.parse_args()))
