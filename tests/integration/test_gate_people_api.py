"""Quorum, delegation and typed answers through the HTTP API: a real API server, the dev
server, a worker and PostgreSQL; every refusal is a precise 4xx and writes nothing."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest_asyncio

from tests.helpers import IDEA, eventually, live_api
from tests.integration.test_groups import SECRET, auth, people, wedding
from waystation.api.run_kinds import start_run
from waystation.contracts.gate_policy import GATE_POLICY_MEMO, GatePolicy
from waystation.kinds.validation.kind import VALIDATION
from waystation.persistence.runs import create_run

GATE = "approve_founders_brief"


@pytest_asyncio.fixture
async def http(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[httpx.AsyncClient]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=30) as client:
        yield client


async def group_run(http: httpx.AsyncClient, p: dict[str, str], gates: dict) -> tuple[str, dict]:
    group_id = await wedding(http, p)
    for who in ("dave",):  # a second approver
        added = await http.post(f"/groups/{group_id}/members", headers=auth(p["alice"]),
                                json={"user": p[who], "role": "approver"})
        assert added.status_code == 201
    started = await http.post("/runs", headers=auth(p["alice"]), json={
        "kind": "validation", "group_id": group_id, "gates": gates,
        "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]

    async def pending() -> dict | None:
        run = (await http.get(f"/runs/{run_id}", headers=auth(p["alice"]))).json()
        return run["pending_decision"] if run.get("pending_checkpoint") == GATE else None
    return run_id, await eventually(pending, timeout=60)


async def decisions(http: httpx.AsyncClient, run_id: str, user: str) -> dict:
    return (await http.get(f"/runs/{run_id}/decisions", headers=auth(user))).json()[
        "decisions"][0]


async def test_two_of_three_approvers_decide_with_one_vote_each(http):
    p = people()
    run_id, pending = await group_run(http, p, {"*": {"quorum": 2}})
    assert pending["quorum"] == 2 and pending["votes"] == []
    path = f"/runs/{run_id}/decisions/{GATE}"

    # A viewer may not vote: 403 naming the rule; nothing written.
    viewer = await http.post(path, json={"decision": "approve"}, headers=auth(p["carol"]))
    assert viewer.status_code == 403 and viewer.json()["error"]["code"] == "not_allowed"
    assert "approver" in viewer.json()["error"]["message"]
    first = await http.post(path, json={"decision": "approve", "digest": pending["digest"],
                                        "feedback": "yes"}, headers=auth(p["bob"]))
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "pending"
    assert [(v["voter"], v["digest"]) for v in first.json()["votes"]] == [
        (p["bob"], pending["digest"])]
    again = await http.post(path, json={"decision": "approve", "feedback": "really"},
                            headers=auth(p["bob"]))
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_voted"
    # bob's inbox no longer shows it; dave's still does.
    bob_inbox = (await http.get("/decisions", headers=auth(p["bob"]))).json()["decisions"]
    dave_inbox = (await http.get("/decisions", headers=auth(p["dave"]))).json()["decisions"]
    assert run_id not in {d["run_id"] for d in bob_inbox}
    assert run_id in {d["run_id"] for d in dave_inbox}
    assert len((await decisions(http, run_id, p["alice"]))["votes"]) == 1

    decided = await http.post(path, json={"decision": "approve"}, headers=auth(p["dave"]))
    assert decided.status_code == 200 and decided.json()["status"] == "approved"
    audit = await decisions(http, run_id, p["carol"])
    assert [v["voter"] for v in audit["votes"]] == [p["bob"], p["dave"]]
    assert audit["decided_by"] == p["dave"]


async def test_delegation_hands_a_vote_to_another_member(http):
    p = people()
    run_id, pending = await group_run(http, p, {"*": {"quorum": 2}})
    path = f"/runs/{run_id}/decisions/{GATE}"
    stranger = await http.post(f"{path}/delegate", json={"to": f"nobody-{uuid.uuid4().hex}"},
                               headers=auth(p["bob"]))
    assert stranger.status_code == 404 and stranger.json()["error"]["code"] == "member_not_found"
    by_viewer = await http.post(f"{path}/delegate", json={"to": p["erin"]},
                                headers=auth(p["carol"]))
    assert by_viewer.status_code == 403
    bad = await http.post(f"{path}/delegate", json={"to": p["erin"], "extra": 1},
                          headers=auth(p["bob"]))
    assert bad.status_code == 422
    assert (await decisions(http, run_id, p["bob"]))["delegations"] == []

    # bob hands his vote to erin (a planner, who may not decide on her own).
    handed = await http.post(f"{path}/delegate", json={"to": p["erin"]}, headers=auth(p["bob"]))
    assert handed.status_code == 200, handed.text
    assert [(d["from_user"], d["to_user"]) for d in handed.json()["delegations"]] == [
        (p["bob"], p["erin"])]
    # A client resending the same delegation (its answer lost) gets the same 200, once.
    resent = await http.post(f"{path}/delegate", json={"to": p["erin"]}, headers=auth(p["bob"]))
    assert resent.status_code == 200, resent.text
    assert resent.json()["delegations"] == handed.json()["delegations"]
    elsewhere = await http.post(f"{path}/delegate", json={"to": p["alice"]},
                                headers=auth(p["bob"]))
    assert elsewhere.status_code == 409
    assert run_id in {d["run_id"] for d in (await http.get(
        "/decisions", headers=auth(p["erin"]))).json()["decisions"]}
    own = await http.post(path, json={"decision": "approve"}, headers=auth(p["bob"]))
    assert own.status_code == 409
    cast = await http.post(path, json={"decision": "approve"}, headers=auth(p["erin"]))
    assert cast.status_code == 200 and cast.json()["status"] == "pending"
    assert [(v["voter"], v["on_behalf_of"]) for v in cast.json()["votes"]] == [
        (p["erin"], p["bob"])]
    done = await http.post(path, json={"decision": "approve"}, headers=auth(p["alice"]))
    assert done.json()["status"] == "approved"


async def test_typed_answer_refused_with_its_path_then_stored(http):
    p = people()
    schema = {"type": "object", "required": ["guests"], "additionalProperties": False,
              "properties": {"guests": {"type": "integer", "minimum": 1},
                             "venue": {"type": "string"}}}
    run_id, pending = await group_run(http, p, {GATE: {
        "answer_schema": schema, "answer_options": {"approve": "optional"}}})
    assert pending["answer_schema"] == schema
    assert {o["value"]: o["answer"] for o in pending["options"]}["approve"] == "optional"
    path = f"/runs/{run_id}/decisions/{GATE}"
    for answer, where in (({"guests": 0}, "answer.guests"), ({"guests": 2, "x": 1}, "answer"),
                          ("many", "answer")):
        refused = await http.post(path, json={"decision": "approve", "answer": answer},
                                  headers=auth(p["bob"]))
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "invalid_answer"
        assert refused.json()["error"]["details"] == [{"path": where}]
    assert (await decisions(http, run_id, p["bob"]))["votes"] == []
    ok = await http.post(path, json={"decision": "approve", "answer": {"guests": 120}},
                         headers=auth(p["bob"]))
    assert ok.status_code == 200 and ok.json()["answer"] == {"guests": 120}


async def test_bad_gate_rules_at_start_are_422_and_start_nothing(http):
    p = people()
    before = (await http.get("/runs", headers=auth(p["alice"]))).json()["runs"]
    for gates in ({"*": {"quorum": 0}}, {"*": {"answer_schema": {"type": "nope"}}},
                  {"*": {"answer_options": {"approve": "required"}}},
                  {"Bad Name": {"quorum": 2}}, {"*": {"escalate_after": "P1D"}},
                  {"*": {"remind_every": "PT10S"}}, {"*": {"unknown": 1}}):
        response = await http.post("/runs", headers=auth(p["alice"]), json={
            "kind": "validation", "gates": gates, "input": {"entrepreneur_input": IDEA}})
        assert response.status_code == 422, (gates, response.text)
    assert (await http.get("/runs", headers=auth(p["alice"]))).json()["runs"] == before


async def test_a_kinds_gate_defaults_reach_the_workflow_under_the_runs_own_rules(
        dev_env, pool, task_queue):
    kind = dataclasses.replace(VALIDATION, gate_policy={
        "*": GatePolicy(remind_every=timedelta(days=1), quorum=3),
        GATE: GatePolicy(decider_roles=["board"])})
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        run, _ = await create_run(
            conn, run_id=run_id, kind=kind.name, owner="kim", group_id=None,
            workflow_id=kind.workflow_id(run_id), idempotency_key=None,
            input={"entrepreneur_input": IDEA, "gates": [GATE]},
            gate_policies={"*": {"quorum": 2}})
    await start_run(dev_env.client, task_queue, kind, run)
    handle = dev_env.client.get_workflow_handle(run.workflow_id)
    memo = await (await handle.describe()).memo_value(GATE_POLICY_MEMO)
    await handle.terminate()
    assert memo == {"*": {"remind_every": "P1D", "quorum": 2},
                    GATE: {"decider_roles": ["board"]}}
