"""Decision policies end to end (issue 42): the real API under uvicorn, the dev server, real
Postgres and a worker running the built-in planner agent, whose bookings wait at a tool
approval. A policy approves small bookings and leaves large ones to a person; one changed
while a run waits leaves that run's verdict and its replay unchanged; a shadow policy reports
its agreement; a bad condition is a 422 naming its position; nobody sees another's policies."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio
from temporalio.worker import Replayer

from tests.helpers import eventually, live_api
from waystation.api.auth import issue_token
from waystation.registry import load_registry
from waystation.temporal_client import DATA_CONVERTER
from waystation.worker import worker_workflows

SECRET = "policies-secret-0123456789-0123456789-abcdef"
SMALL = "Book Rosewood Estate on 2027-02-14 for 40 guests"
LARGE = "Book Rosewood Estate on 2027-02-14 for 180 guests"
SMALL_BOOKINGS = 'request.tool.name == "book_vendor" && request.tool.args.guests <= 50'


@pytest_asyncio.fixture
async def http(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[httpx.AsyncClient]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=30) as client:
        yield client


def auth(user: str, role: str = "user") -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user, role)}"}  # type: ignore[arg-type]


def person(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def policy(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "kind": "agent", "condition": SMALL_BOOKINGS,
            "decision": {"decision": "approve", "feedback": "a small booking"}, **fields}


async def book(http: httpx.AsyncClient, user: str, message: str, **fields: Any) -> str:
    started = await http.post("/runs", headers=auth(user), json={
        "kind": "agent", "input": {"message": message}, **fields})
    assert started.status_code == 201, started.text
    return str(started.json()["run_id"])


async def approval(http: httpx.AsyncClient, user: str, run_id: str, *,
                   status: str | None = None) -> dict[str, Any]:
    """The run's tool-approval request, once it exists (and has `status`, when given)."""
    async def check() -> dict[str, Any] | None:
        listed = (await http.get(f"/runs/{run_id}/decisions", headers=auth(user))).json()
        found = [d for d in listed["decisions"]
                 if d["checkpoint_name"].startswith("approve_book_vendor")]
        return found[0] if found and status in (None, found[0]["status"]) else None
    return await eventually(check, timeout=60)


async def verdicts(pool, run_id: str) -> list[tuple[Any, ...]]:
    async with pool.acquire() as conn:
        return [tuple(r) for r in await conn.fetch(
            "SELECT name, version, mode, outcome, decision FROM policy_evaluations "
            "WHERE run_id = $1 ORDER BY name", uuid.UUID(run_id))]


async def test_a_policy_approves_small_bookings_and_leaves_a_large_one_to_a_person(http, pool):
    maya = person("maya")
    created = await http.post("/policies", json=policy("small-bookings"), headers=auth(maya))
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["version"] == 1 and body["mode"] == "decide" and body["owner"] == maya
    again = await http.post("/policies", json=policy("small-bookings"), headers=auth(maya))
    assert again.status_code == 201 and again.json()["policy_id"] == body["policy_id"]

    small, large = await book(http, maya, SMALL), await book(http, maya, LARGE)
    decided = await approval(http, maya, small, status="approved")
    assert decided["decided_by"] == "policy:small-bookings@1"
    assert decided["feedback"] == "a small booking"
    assert decided["decision"] == "approve"
    waiting = await approval(http, maya, large)
    await asyncio.sleep(0.5)
    assert (await approval(http, maya, large))["status"] == "pending"
    assert await verdicts(pool, large) == [("small-bookings", 1, "decide", "none", None)]
    assert await verdicts(pool, small) == [("small-bookings", 1, "decide", "decide", "approve")]
    # The timeline says which policy decided, as for any decision.
    events = (await http.get(f"/runs/{small}/events", headers=auth(maya))).json()["events"]
    opened = [e for e in events if e["type"] == "gate.opened"][0]
    assert opened["output"]["policies"] == [{"policy": "policy:small-bookings@1",
                                             "mode": "decide", "outcome": "decide",
                                             "decision": "approve"}]
    assert any(e["type"] == "gate.decided"
               and e["output"]["decided_by"] == "policy:small-bookings@1" for e in events)
    # The large one a person decides, as ever.
    approved = await http.post(f"/runs/{large}/decisions/{waiting['checkpoint_name']}",
                               json={"decision": "approve"}, headers=auth(maya))
    assert approved.status_code == 200, approved.text
    assert approved.json()["decided_by"] == maya

    # Another user's run is not judged by maya's policy, and she sees none of theirs.
    omar = person("omar")
    theirs = await book(http, omar, SMALL)
    assert (await approval(http, omar, theirs))["status"] == "pending"
    assert await verdicts(pool, theirs) == []
    assert (await http.get("/policies", headers=auth(omar))).json() == {"policies": []}
    for call in (http.get(f"/policies/{body['policy_id']}", headers=auth(omar)),
                 http.put(f"/policies/{body['policy_id']}", json=policy("small-bookings"),
                          headers=auth(omar)),
                 http.delete(f"/policies/{body['policy_id']}", headers=auth(omar)),
                 http.post(f"/policies/{body['policy_id']}/dry-run", headers=auth(omar))):
        refused = await call
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["code"] == "policy_not_found"

    # A dry run: the policy on maya's past requests, beside what was decided.
    dry = await http.post(f"/policies/{body['policy_id']}/dry-run", json={"last": 10},
                          headers=auth(maya))
    assert dry.status_code == 200, dry.text
    runs = {r["run_id"]: r for r in dry.json()["requests"]}
    assert set(runs) == {small, large}
    assert runs[small]["would_decide"] == "approve" and runs[small]["agrees"] is True
    assert runs[large]["outcome"] == "none" and runs[large]["would_decide"] is None


async def test_a_policy_changed_while_a_run_waits_leaves_its_verdict_and_replay(
        http, pool, dev_env):
    lena = person("lena")
    created = (await http.post("/policies", json=policy("bookings"), headers=auth(lena))).json()
    run_id = await book(http, lena, LARGE)
    waiting = await approval(http, lena, run_id)
    # Version 2 would approve any booking; the waiting run was judged by version 1.
    changed = await http.put(f"/policies/{created['policy_id']}", headers=auth(lena),
                             json=policy("bookings", condition="true"))
    assert changed.status_code == 200, changed.text
    assert changed.json()["version"] == 2
    assert (await http.get(f"/policies/{created['policy_id']}",
                           headers=auth(lena))).json()["condition"] == "true"
    await asyncio.sleep(0.5)
    assert (await approval(http, lena, run_id))["status"] == "pending"
    assert await verdicts(pool, run_id) == [("bookings", 1, "decide", "none", None)]
    decided = await http.post(f"/runs/{run_id}/decisions/{waiting['checkpoint_name']}",
                              json={"decision": "reject", "feedback": "too many"},
                              headers=auth(lena))
    assert decided.status_code == 200, decided.text
    history = await dev_env.client.get_workflow_handle(f"agent-{run_id}").fetch_history()
    replayed = await Replayer(workflows=worker_workflows(load_registry(use_entry_points=False)),
                              data_converter=DATA_CONVERTER).replay_workflow(history)
    assert replayed.replay_failure is None
    # The next run is judged by version 2.
    next_run = await book(http, lena, LARGE)
    assert (await approval(http, lena, next_run, status="approved"))["decided_by"] == \
        "policy:bookings@2"


async def test_a_shadow_policy_reports_its_agreement_after_ten_human_decisions(http, pool):
    ines = person("ines")
    created = await http.post("/policies", headers=auth(ines),
                              json=policy("shadow-small", mode="shadow"))
    assert created.status_code == 201, created.text
    runs = [await book(http, ines, SMALL) for _ in range(10)]
    for number, run_id in enumerate(runs):
        waiting = await approval(http, ines, run_id)
        # A shadow policy only watches: the person decides.
        assert waiting["status"] == "pending"
        option = "reject" if number < 3 else "approve"
        decided = await http.post(f"/runs/{run_id}/decisions/{waiting['checkpoint_name']}",
                                  json={"decision": option}, headers=auth(ines))
        assert decided.status_code == 200, decided.text
        assert decided.json()["decided_by"] == ines
    shown = (await http.get(f"/policies/{created.json()['policy_id']}",
                            headers=auth(ines))).json()
    assert shown["shadow"] == {"compared": 10, "agreed": 7, "rate": 0.7}


async def test_a_bad_condition_is_a_422_naming_its_position_and_writes_nothing(http, pool):
    nora = person("nora")
    bad = await http.post("/policies", headers=auth(nora),
                          json=policy("broken", condition="request.tool.args.guests <= "))
    assert bad.status_code == 422, bad.text
    error = bad.json()["error"]
    assert error["code"] == "invalid_condition"
    assert error["message"].startswith("body.condition: line 1, column 29: ")
    assert error["details"][0]["loc"] == ["body", "condition"]
    assert (error["details"][0]["line"], error["details"][0]["column"]) == (1, 29)
    unknown = await http.post("/policies", headers=auth(nora),
                              json=policy("broken", condition="amount < 3"))
    assert unknown.status_code == 422
    assert "unknown name 'amount'" in unknown.json()["error"]["message"]
    for body in (policy("broken", kind="nope"), policy("Bad Name"),
                 policy("broken", decision={"decision": "approve", "quorum": 2})):
        refused = await http.post("/policies", json=body, headers=auth(nora))
        assert refused.status_code == 422, refused.text
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM decision_policies WHERE owner = $1",
                                   nora) == 0


async def test_group_policies_are_written_by_deciders_and_read_by_members_only(http, pool):
    alice, bob, carol, dave = (person(n) for n in ("alice", "bob", "carol", "dave"))
    group_id = (await http.post("/groups", json={"name": "Venues"},
                                headers=auth(alice))).json()["group_id"]
    for who, role in ((bob, "approver"), (carol, "viewer")):
        added = await http.post(f"/groups/{group_id}/members", headers=auth(alice),
                                json={"user": who, "role": role})
        assert added.status_code == 201, added.text
    viewer = await http.post("/policies", json=policy("venues", group_id=group_id),
                             headers=auth(carol))
    assert viewer.status_code == 403 and viewer.json()["error"]["code"] == "not_allowed"
    outsider = await http.post("/policies", json=policy("venues", group_id=group_id),
                               headers=auth(dave))
    assert outsider.status_code == 404
    made = await http.post("/policies", json=policy("venues", group_id=group_id),
                           headers=auth(bob))
    assert made.status_code == 201, made.text
    policy_id = made.json()["policy_id"]
    assert [p["policy_id"] for p in (await http.get("/policies", headers=auth(carol)))
            .json()["policies"]] == [policy_id]
    assert (await http.get(f"/policies/{policy_id}", headers=auth(dave))).status_code == 404
    # A group run is judged by its group's policy.
    run = await http.post("/runs", headers=auth(carol), json={
        "kind": "agent", "group_id": group_id, "input": {"message": SMALL}})
    assert run.status_code == 403  # a viewer starts no run
    run = await http.post("/runs", headers=auth(alice), json={
        "kind": "agent", "group_id": group_id, "input": {"message": SMALL}})
    assert run.status_code == 201, run.text
    decided = await approval(http, alice, run.json()["run_id"], status="approved")
    assert decided["decided_by"] == "policy:venues@1"
    # A removed member sees it no more and may not change it.
    removed = await http.delete(f"/groups/{group_id}/members/{bob}", headers=auth(alice))
    assert removed.status_code == 204, removed.text
    assert (await http.get("/policies", headers=auth(bob))).json() == {"policies": []}
    for call in (http.put(f"/policies/{policy_id}", headers=auth(bob),
                          json=policy("venues", condition="false")),
                 http.delete(f"/policies/{policy_id}", headers=auth(bob))):
        assert (await call).status_code == 404
    # An erased user gets nothing (with a token from before the erasure), and her own
    # policies judge no gate from then on.
    hers = auth(alice)
    own = await http.post("/policies", json=policy("mine"), headers=hers)
    assert own.status_code == 201, own.text
    erased = await http.post("/admin/erasure", json={"user": alice},
                             headers=auth("ops", "service"))
    assert erased.status_code == 202, erased.text
    assert (await http.get("/policies", headers=hers)).status_code == 401
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT deleted_at IS NOT NULL FROM decision_policies "
                                   "WHERE id = $1", uuid.UUID(own.json()["policy_id"]))
    deleted = await http.delete(f"/policies/{policy_id}", headers=auth(carol))
    assert deleted.status_code == 403
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT version FROM decision_policies WHERE id = $1",
                                   uuid.UUID(policy_id)) == 1


async def test_policy_writes_count_against_the_callers_limit_and_a_refusal_writes_nothing(
        migrated_url, dev_env, pool, task_queue):
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        writes_per_minute=2) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        rita = person("rita")
        for name in ("one", "two"):
            made = await http.post("/policies", json=policy(name), headers=auth(rita))
            assert made.status_code == 201, made.text
        refused = await http.post("/policies", json=policy("three"), headers=auth(rita))
        assert refused.status_code == 429, refused.text
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM decision_policies "
                                       "WHERE owner = $1", rita) == 2
        # Another caller's limit is its own.
        assert (await http.post("/policies", json=policy("one"),
                                headers=auth(person("sam")))).status_code == 201


async def test_policies_route_a_gate_ask_a_larger_quorum_or_leave_it_to_people(http, pool):
    zoe = person("zoe")
    bodies = [policy("a-route", decision={"route_to_roles": ["planner"],
                                          "route_to_users": ["lee"]}),
              policy("b-quorum", decision={"quorum": 2}),
              policy("c-people", decision={}),
              policy("d-decide")]
    for body in bodies:
        made = await http.post("/policies", json=body, headers=auth(zoe))
        assert made.status_code == 201, made.text
    run_id = await book(http, zoe, SMALL)
    request = await approval(http, zoe, run_id)
    await asyncio.sleep(0.5)
    assert (await approval(http, zoe, run_id))["status"] == "pending"  # c-people holds d back
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT decider_roles, decider_users, quorum FROM "
                                  "hitl_requests WHERE id = $1",
                                  uuid.UUID(request["request_id"]))
    assert (row["decider_roles"], row["decider_users"], row["quorum"]) == (
        ["planner"], ["lee"], 2)
    assert await verdicts(pool, run_id) == [
        ("a-route", 1, "decide", "route", None), ("b-quorum", 1, "decide", "quorum", None),
        ("c-people", 1, "decide", "people", None),
        ("d-decide", 1, "decide", "decide", "approve")]


async def test_a_policy_s_decision_is_amended_by_a_fork_like_any_other(http, pool):
    """The issue's own example: a policy approves every founders' brief of a coffee idea; a
    fork from that gate with another decision is decided by the person who forked."""
    vera = person("vera")
    made = await http.post("/policies", headers=auth(vera), json={
        "name": "coffee", "kind": "validation", "checkpoint": "approve_founders_brief",
        "condition": 'run.input.entrepreneur_input.contains("coffee")',
        "decision": {"decision": "approve", "feedback": "we know coffee"}})
    assert made.status_code == 201, made.text
    started = await http.post("/runs", headers=auth(vera), json={
        "kind": "validation", "input": {"entrepreneur_input": "Cold brew coffee for offices"}})
    assert started.status_code == 201, started.text
    source = started.json()["run_id"]

    async def decided() -> dict[str, Any] | None:
        listed = (await http.get(f"/runs/{source}/decisions", headers=auth(vera))).json()
        found = [d for d in listed["decisions"]
                 if d["checkpoint_name"] == "approve_founders_brief"]
        return found[0] if found and found[0]["status"] == "approved" else None
    brief = await eventually(decided, timeout=60)
    assert (brief["decided_by"], brief["feedback"]) == ("policy:coffee@1", "we know coffee")
    forked = await http.post(f"/runs/{source}/fork", headers=auth(vera), json={
        "from": {"checkpoint": "approve_founders_brief"},
        "decision": {"decision": "reject", "feedback": "not coffee after all"}})
    assert forked.status_code == 201, forked.text
    fork = forked.json()["run_id"]

    async def amended() -> dict[str, Any] | None:
        listed = (await http.get(f"/runs/{fork}/decisions", headers=auth(vera))).json()
        found = [d for d in listed["decisions"]
                 if d["checkpoint_name"] == "approve_founders_brief" and d["decision"]]
        return found[0] if found else None
    again = await eventually(amended, timeout=60)
    # The fork's decision is applied first, by its person; the policy did not decide it.
    assert (again["decision"], again["decided_by"]) == ("reject", vera)
    for run_id in (source, fork):
        await http.post(f"/runs/{run_id}/cancel", headers=auth(vera))
