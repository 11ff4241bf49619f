"""Overhead of the OpenAI-compatible backend per call, beside a raw HTTP call.

Both sides call the same local OpenAI-compatible server (tests/openai_stub.py, real HTTP,
streamed SSE answers with usage) for the same structured answer. The raw side is httpx
posting the request and reading the stream; the backend adds building the messages and the
strict schema, parsing the chunks, reading and validating the answer and pricing the usage.

    python -m bench.bench_agent_backend --calls 500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import httpx

from bench.common import markdown_table, percentile, ratio
from tests.openai_stub import OpenAIStub
from waystation.activities.agents import AgentRequest
from waystation.activities.agents.openai_compatible import OpenAICompatibleBackend
from waystation.kinds.validation.activities.outputs import ValidationSignal

SCHEMA = ValidationSignal.model_json_schema()
ANSWER = json.dumps({"strength": "moderate", "confidence": 0.7,
                     "rationale": "2 of 3 experiments met their threshold " * 10,
                     "evidence_cited": ["pre-order page", "interviews"]})
REQUEST = AgentRequest(crew="governance", task="judge_desirability", agent="evidence_judge",
                       instructions="Judge the desirability evidence.",
                       system="You are the evidence judge." * 20,
                       context={"desirability_evidence": {"experiments": [
                           {"name": f"test {i}", "result": i, "threshold": 3}
                           for i in range(10)]}},
                       output_schema=SCHEMA, schema_name="judge_desirability")


async def raw_call(client: httpx.AsyncClient, body: dict) -> None:
    async with client.stream("POST", "/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                break


async def measure(calls: int) -> tuple[list[float], list[float]]:
    stub = OpenAIStub(default_text=lambda request: ANSWER)
    await stub.start()
    backend = OpenAICompatibleBackend(base_url=stub.base_url, api_key="k", model="gpt-4o-mini")
    raw = httpx.AsyncClient(base_url=stub.base_url)
    body = {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": REQUEST.system},
                         {"role": "user", "content": json.dumps(REQUEST.context)}]}
    ours: list[float] = []
    theirs: list[float] = []
    try:
        for i in range(calls + 20):  # the first 20 of each warm up connections
            # Alternate, so drift on a shared machine hits both sides alike.
            started = time.perf_counter()
            await backend.run(REQUEST)
            backend_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            await raw_call(raw, body)
            raw_ms = (time.perf_counter() - started) * 1000
            if i >= 20:
                ours.append(backend_ms)
                theirs.append(raw_ms)
    finally:
        await backend.aclose()
        await raw.aclose()
        await stub.stop()
    return ours, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    ours, theirs = asyncio.run(measure(args.calls))
    rows = []
    for label, pick in (("p50", lambda s: statistics.median(s)),
                        ("p99", lambda s: percentile(s, 99)),
                        ("mean", lambda s: statistics.fmean(s))):
        rows.append([f"per call, {label}", f"{pick(ours):.2f} ms", f"{pick(theirs):.2f} ms",
                     ratio(pick(ours), pick(theirs))])
    overhead = statistics.median(ours) - statistics.median(theirs)
    print(markdown_table(["figure", "backend", "raw httpx", "ratio"], rows,
                         [False, True, True, True]))
    print(f"\nbackend overhead per call (p50 difference): {overhead:.2f} ms over {args.calls} "
          "calls")


if __name__ == "__main__":
    main()
