"""Record AgentRun histories through the API on a real stack (`waystation.testing.local_stack`):
`python -m tests.tools.record_agent_api_histories`.

Each case drives the offline planner as a person would (messages, an approval approved,
rejected with feedback or edited, a tool the model invents), cancels the run, and writes
tests/histories/agent_<case>.json for tests/replay/test_replay.py. The time-skipping recorder
(tests.tools.record_agent_histories) keeps the expiry case, which needs skipped time.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from tests.agent_helpers import AVAILABILITY, BOOK, LIKE, SEARCH
from tests.helpers import eventually
from waystation.testing import LocalStack, local_stack

HISTORIES = Path(__file__).resolve().parents[1] / "histories"
EDITED = {"vendor_id": "v-venue-03", "date": "2027-02-14", "guests": 150}


async def _answers(http: httpx.AsyncClient, run_id: str, count: int) -> None:
    async def check() -> bool:
        run = (await http.get(f"/runs/{run_id}")).json()
        page = (await http.get(f"/runs/{run_id}/messages", params={"limit": 500})).json()
        answered = [m for m in page["messages"] if m["type"] == "agent.answered"]
        return run["status"] == "paused" and len(answered) == count
    await eventually(check, timeout=60)


async def _approval(http: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        run = (await http.get(f"/runs/{run_id}")).json()
        return run if (run["pending_checkpoint"] or "").startswith("approve_") else None
    return await eventually(check, timeout=60)


async def _start(http: httpx.AsyncClient, message: str, **fields: Any) -> str:
    created = await http.post("/runs", json={"kind": "agent",
                                             "input": {"message": message, **fields}})
    created.raise_for_status()
    return str(created.json()["run_id"])


async def conversation(http: httpx.AsyncClient) -> str:
    run_id = await _start(http, SEARCH)
    await _answers(http, run_id, 1)
    (await http.post(f"/runs/{run_id}/messages", json={"text": LIKE})).raise_for_status()
    await _answers(http, run_id, 2)
    return run_id


async def member_returns(http: httpx.AsyncClient) -> str:
    """Seed 003: a message past the run's return gap, re-primed from the summary and the
    related entities (not the transcript) and greeted. Recorded here, not on the
    time-skipping server, where conversations hang the recorder (tests.record_agent_histories)."""
    run_id = await _start(http, SEARCH, return_gap_seconds=1)
    await _answers(http, run_id, 1)
    (await http.post(f"/runs/{run_id}/messages", json={"text": LIKE})).raise_for_status()
    await _answers(http, run_id, 2)
    await asyncio.sleep(1.5)
    (await http.post(f"/runs/{run_id}/messages", json={"text": AVAILABILITY})
     ).raise_for_status()
    await _answers(http, run_id, 3)
    return run_id


def _decided(decision: str, feedback: str | None = None, arguments: dict[str, Any] | None = None,
             *, field: str = "arguments") -> Callable[..., Awaitable[str]]:
    async def case(http: httpx.AsyncClient) -> str:
        run_id = await _start(http, BOOK)
        run = await _approval(http, run_id)
        body: dict[str, Any] = {"decision": decision, "feedback": feedback,
                                "digest": run["pending_decision"]["digest"]}
        if arguments is not None:
            body[field] = arguments
        answer = await http.post(f"/runs/{run_id}/decisions/{run['pending_checkpoint']}",
                                 json=body)
        answer.raise_for_status()
        await _answers(http, run_id, 1)
        return run_id
    return case


async def unknown_tool(http: httpx.AsyncClient) -> str:
    run_id = await _start(http, "Compare Old Mill Barn and Rosewood Estate")
    await _answers(http, run_id, 1)
    return run_id


CASES: dict[str, Callable[[httpx.AsyncClient], Awaitable[str]]] = {
    "conversation": conversation,
    "approval_approved": _decided("approve"),
    "approval_rejected": _decided("reject", "not that date, ask me again"),
    "approval_edited": _decided("edit", "fewer guests", EDITED),
    # Since typed answers: the edit is the gate's answer, which its digest covers.
    "approval_edited_typed_answer": _decided("edit", "fewer guests", EDITED, field="answer"),
    "unknown_tool": unknown_tool,
    # Since the model follows the worker's configuration (the patch `agent-configured-model`).
    "conversation_configured_model": conversation,
    # Since returning members are re-primed (the patch `agent-returning-member`, issue 29).
    "member_returns": member_returns,
}


async def record(stack: LocalStack, names: list[str]) -> None:
    async with stack.client("priya") as http:
        for name, case in CASES.items():
            if names and name not in names:
                continue
            run_id = await case(http)
            (await http.post(f"/runs/{run_id}/cancel")).raise_for_status()
            handle = stack.temporal.get_workflow_handle(f"agent-{run_id}")
            await eventually(lambda h=handle: _closed(h), timeout=60)
            history = await handle.fetch_history()
            (HISTORIES / f"agent_{name}.json").write_text(history.to_json())
            print(f"recorded agent_{name}.json ({len(history.events)} events)", flush=True)


async def _closed(handle: Any) -> bool:
    return (await handle.describe()).status.name != "RUNNING"


async def main(names: list[str]) -> None:
    """Record the named cases (all without names)."""
    if unknown := set(names) - set(CASES):
        raise SystemExit(f"unknown case(s): {', '.join(sorted(unknown))}")
    async with local_stack() as stack:
        await record(stack, names)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
