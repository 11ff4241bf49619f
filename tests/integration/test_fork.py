"""Issue 29's fork over HTTP (real Postgres, dev server, in-process worker): a new run from a
snapshot of another, amending a past decision, forking a run that still waits, and every
refusal writing nothing."""

from __future__ import annotations

import uuid

import asyncpg

from tests.helpers import IDEA, eventually
from tests.inprocess_api import auth, start_run, wait_pending
from waystation.persistence.runs import create_run

BRIEF = "approve_founders_brief"
VPC = "approve_vpc_completion"


async def _events(api, run_id: str) -> list[dict]:
    page = await api.get(f"/runs/{run_id}/events?limit=1000", headers=auth())
    return page.json()["events"]


async def _fork(api, run_id: str, body: dict, user: str = "alice", **headers: str):
    return await api.post(f"/runs/{run_id}/fork", json=body,
                          headers={**auth(user), **headers})


async def test_fork_amends_a_past_decision(api, dev_env):
    source = await start_run(api, gates=[BRIEF, VPC])
    pending = (await wait_pending(api, source, BRIEF))["pending_decision"]
    approved = await api.post(f"/runs/{source}/decisions/{BRIEF}",
                              json={"decision": "approve", "digest": pending["digest"]},
                              headers=auth())
    assert approved.status_code == 200, approved.text
    waiting = await wait_pending(api, source, VPC)
    source_events = await _events(api, source)

    body = {"from": {"checkpoint": BRIEF},
            "decision": {"decision": "reject", "feedback": "narrow it to dentists"}}
    forked = await _fork(api, source, body, **{"Idempotency-Key": "amend-1"})
    assert forked.status_code == 201, forked.text
    fork_id = forked.json()["run_id"]
    assert fork_id != source and forked.json()["kind"] == "validation"
    again = await _fork(api, source, body, **{"Idempotency-Key": "amend-1"})
    assert again.json()["run_id"] == fork_id and again.json()["created"] is False
    assert again.headers["Idempotent-Replayed"] == "true"

    # The rejection re-runs phase 0 with the feedback, and the fork waits at its gate again.
    async def rejected_and_rerun():
        decisions = (await api.get(f"/runs/{fork_id}/decisions", headers=auth())).json()
        statuses = [d["status"] for d in decisions["decisions"]]
        return decisions["decisions"] if statuses == ["rejected", "pending"] else None
    decisions = await eventually(rejected_and_rerun)
    assert decisions[0]["decided_by"] == "alice"
    assert decisions[0]["feedback"] == "narrow it to dentists"
    view = (await api.get(f"/runs/{fork_id}", headers=auth())).json()
    assert view["owner"] == "alice" and view["pending_checkpoint"] == BRIEF
    snapshot_ordinal = view["forked_from"]["snapshot"]
    assert view["forked_from"] == {
        "run_id": source, "snapshot": snapshot_ordinal, "checkpoint": BRIEF,
        "decision": {"checkpoint_name": BRIEF, "decision": "reject",
                     "feedback": "narrow it to dentists", "answer": None,
                     "decided_by": "alice"}}

    events = await _events(api, fork_id)
    assert events[0]["type"] == "run.started"
    assert events[0]["output"]["forked_from"]["run_id"] == source
    described = await dev_env.client.get_workflow_handle(view["workflow_id"]).describe()
    assert f"fork of {source} at snapshot {snapshot_ordinal}" in await described.static_summary()
    details = await described.static_details()
    assert details is not None and "decision 'reject' applied first" in details
    # Phase 0's outputs were kept: its gate opened and was decided before any phase work.
    types = [e["type"] for e in events]
    decided_at = types.index("gate.decided")
    assert types[1:decided_at + 1] == ["gate.opened", "gate.decided"]
    assert types[decided_at + 1] == "phase.started"
    assert events[decided_at + 1]["phase"] == 0
    state = (await api.get(f"/runs/{fork_id}/snapshots/latest", headers=auth())).json()["state"]
    assert state["feedback"] == {"0": "narrow it to dentists"}
    # The snapshot was taken before the source's approval: the fork's rejection replaces it.
    assert [d["decision"] for d in state["decisions"]] == ["reject"]

    # The source is untouched: still waiting at the same request, no new events.
    still = (await api.get(f"/runs/{source}", headers=auth())).json()
    assert still["pending_decision"]["request_id"] == waiting["pending_decision"]["request_id"]
    assert await _events(api, source) == source_events
    assert still["forked_from"] is None


async def test_fork_of_a_waiting_run_from_a_snapshot(api):
    source = await start_run(api, gates=[BRIEF])
    waiting = await wait_pending(api, source, BRIEF)
    heads = (await api.get(f"/runs/{source}/snapshots", headers=auth())).json()["snapshots"]
    at_gate = next(h for h in heads if h["label"] == f"gate {BRIEF}")
    kept = (await api.get(f"/runs/{source}/snapshots/{at_gate['step_ordinal']}",
                          headers=auth())).json()["state"]

    forked = await _fork(api, source, {"from": {"snapshot": at_gate["step_ordinal"]}})
    assert forked.status_code == 201, forked.text
    fork_id = forked.json()["run_id"]
    fork = await wait_pending(api, fork_id, BRIEF)
    assert fork["forked_from"]["checkpoint"] == BRIEF and fork["forked_from"]["decision"] is None
    state = (await api.get(f"/runs/{fork_id}/snapshots/latest", headers=auth())).json()["state"]
    assert state["founders_brief"] == kept["founders_brief"]
    assert state["run_id"] == fork_id and state["phase_attempts"] == {"0": 1}
    # The fork then goes on as any run: approved, it completes.
    approved = await api.post(f"/runs/{fork_id}/decisions/{BRIEF}",
                              json={"decision": "approve"}, headers=auth())
    assert approved.status_code == 200, approved.text

    async def completed():
        run = (await api.get(f"/runs/{fork_id}", headers=auth())).json()
        return run if run["status"] == "completed" else None
    await eventually(completed)
    source_now = (await api.get(f"/runs/{source}", headers=auth())).json()
    assert source_now["status"] == "paused"
    assert source_now["pending_decision"]["request_id"] == \
        waiting["pending_decision"]["request_id"]


async def test_fork_refusals_write_nothing(api, pool: asyncpg.Pool):
    source = await start_run(api, gates=[BRIEF])
    await wait_pending(api, source, BRIEF)
    heads = (await api.get(f"/runs/{source}/snapshots", headers=auth())).json()["snapshots"]
    not_at_gate = next(h for h in heads if h["label"] == "phase 0 completed")

    async def run_count() -> int:
        async with pool.acquire() as conn:
            return await conn.fetchval("SELECT count(*) FROM runs")
    before = await run_count()

    hidden = await _fork(api, source, {"from": {"checkpoint": BRIEF}}, user="bob")
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "run_not_found"
    cases = [
        ({"from": {"snapshot": 999}}, "invalid_request", ["body", "from", "snapshot"]),
        ({"from": {"checkpoint": VPC}}, "invalid_request", ["body", "from", "checkpoint"]),
        ({"from": {"checkpoint": BRIEF}, "decision": {"decision": "maybe"}},
         "unknown_option", ["body", "decision", "decision"]),
        ({"from": {"snapshot": not_at_gate["step_ordinal"]}, "decision": {"decision": "reject"}},
         "invalid_request", ["body", "decision"]),
        ({"from": {"checkpoint": BRIEF}, "input": {"max_phase_retries": 99}},
         "invalid_request", ["body", "input", "max_phase_retries"]),
        ({"from": {"checkpoint": BRIEF}, "decision": {"decision": "reject"},
          "input": {"gates": []}}, "invalid_request", ["body", "decision"]),
        ({"from": {"snapshot": 1, "checkpoint": BRIEF}}, "invalid_request", ["body", "from"]),
    ]
    for body, code, loc in cases:
        refused = await _fork(api, source, body)
        assert refused.status_code == 422, (body, refused.text)
        error = refused.json()["error"]
        assert error["code"] == code, (body, error)
        assert error["details"][0]["loc"] == loc, (body, error)
    assert await run_count() == before


async def test_kinds_without_the_hook_say_why(api, pool: asyncpg.Pool):
    for kind, why in [("content_review", "snapshot")]:
        run_id = uuid.uuid4()
        async with pool.acquire() as conn:
            await create_run(conn, run_id=run_id, kind=kind, owner="alice", group_id=None,
                             workflow_id=f"{kind}-{run_id}", idempotency_key=None, input={})
        refused = await _fork(api, str(run_id), {"from": {"snapshot": 1}})
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "fork_not_supported" and why in error["message"], error
        assert error["details"] == [{"kind": kind, "reason": error["details"][0]["reason"]}]


async def test_agent_fork_carries_on_after_a_turn(api):
    started = await api.post("/runs", json={"kind": "agent", "input": {"message": "Plan a trip"}},
                             headers=auth())
    assert started.status_code == 201, started.text
    source = started.json()["run_id"]

    async def answered(run_id: str, turns: int):
        async def check():
            run = (await api.get(f"/runs/{run_id}", headers=auth())).json()
            page = (await api.get(f"/runs/{run_id}/messages?limit=500", headers=auth())).json()
            done = [m for m in page["messages"] if m["type"] == "agent.answered"]
            return page if run["status"] == "paused" and len(done) == turns else None
        return await eventually(check)
    await answered(source, 1)
    heads = (await api.get(f"/runs/{source}/snapshots", headers=auth())).json()["snapshots"]
    turn_1 = next(h for h in heads if h["label"] == "turn 1")
    source_events = await _events(api, source)

    refused = await _fork(api, source, {"from": {"snapshot": turn_1["step_ordinal"]},
                                        "decision": {"decision": "approve"}})
    assert refused.status_code == 422, refused.text
    forked = await _fork(api, source, {"from": {"snapshot": turn_1["step_ordinal"]}})
    assert forked.status_code == 201, forked.text
    fork_id = forked.json()["run_id"]

    # The fork waits for the next message, as the source did after turn 1, and answers it as
    # turn 2, re-primed from turn 1's summary.
    async def waiting():
        run = (await api.get(f"/runs/{fork_id}", headers=auth())).json()
        return run if run["status"] == "paused" else None
    fork = await eventually(waiting)
    assert fork["forked_from"]["run_id"] == source and fork["current_phase"] == 1
    events = await _events(api, fork_id)
    assert events[0]["type"] == "run.started"
    assert events[0]["output"]["forked_from"]["snapshot"] == turn_1["step_ordinal"]
    said = await api.post(f"/runs/{fork_id}/messages", json={"text": "Make it cheaper"},
                          headers=auth())
    assert said.status_code == 202, said.text
    assert said.json()["turn"] == 2
    page = await answered(fork_id, 1)
    answer = [m for m in page["messages"] if m["type"] == "agent.answered"]
    assert [m["turn"] for m in answer] == [2]
    assert await _events(api, source) == source_events


async def test_a_fork_keeps_the_source_s_gate_rules(api):
    body = {"kind": "validation", "input": {"entrepreneur_input": IDEA, "gates": [BRIEF]},
            "gates": {"*": {"quorum": 2}}}
    started = await api.post("/runs", json=body, headers=auth())
    assert started.status_code == 201, started.text
    source = started.json()["run_id"]
    await wait_pending(api, source, BRIEF)
    forked = await _fork(api, source, {"from": {"checkpoint": BRIEF},
                                       "decision": {"decision": "approve"}})
    assert forked.status_code == 201, forked.text
    fork_id = forked.json()["run_id"]

    # The amended decision is one vote of the two the rules ask for: the gate still waits.
    async def one_vote():
        run = (await api.get(f"/runs/{fork_id}", headers=auth())).json()
        pending = run["pending_decision"]
        return pending if pending and pending["votes"] else None
    pending = await eventually(one_vote)
    assert pending["quorum"] == 2 and [v["voter"] for v in pending["votes"]] == ["alice"]
    assert (await api.get(f"/runs/{fork_id}", headers=auth())).json()["gates"] == \
        {"*": {"quorum": 2}}
