"""Groups and roles end to end: a real API server (uvicorn), the dev server, real Postgres."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest_asyncio

from tests.helpers import IDEA, eventually, live_api
from tests.sse_client import SseEvent, sse_events
from waystation.api.auth import issue_token

SECRET = "groups-secret-0123456789-0123456789-abcdef"
GATE = "approve_founders_brief"


@pytest_asyncio.fixture
async def http(migrated_url, dev_env, pool, task_queue) -> AsyncIterator[httpx.AsyncClient]:
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=1.0) as api, \
            httpx.AsyncClient(base_url=api.url, timeout=30) as client:
        yield client


def auth(user: str, role: str = "user") -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(SECRET, user, role)}"}  # type: ignore[arg-type]


def people() -> dict[str, str]:
    tag = uuid.uuid4().hex[:6]
    return {name: f"{name}-{tag}" for name in ("alice", "bob", "carol", "dave", "erin")}


async def wedding(http: httpx.AsyncClient, p: dict[str, str]) -> str:
    """alice's group: bob approves, carol views, erin is a `planner`; dave is not in it."""
    created = await http.post("/groups", json={"name": "Wedding"}, headers=auth(p["alice"]))
    assert created.status_code == 201, created.text
    assert created.json()["role"] == "owner"
    group_id = created.json()["group_id"]
    for who, role in (("bob", "approver"), ("carol", "viewer"), ("erin", "planner")):
        added = await http.post(f"/groups/{group_id}/members", headers=auth(p["alice"]),
                                json={"user": p[who], "role": role})
        assert added.status_code == 201, added.text
    return group_id


async def members(http: httpx.AsyncClient, group_id: str, user: str) -> dict[str, str]:
    detail = (await http.get(f"/groups/{group_id}", headers=auth(user))).json()
    return {m["user"]: m["role"] for m in detail["members"]}


async def test_group_membership_rules_and_refusals_write_nothing(http, pool):
    p = people()
    group_id = await wedding(http, p)
    before = await members(http, group_id, p["alice"])
    assert before == {p["alice"]: "owner", p["bob"]: "approver", p["carol"]: "viewer",
                      p["erin"]: "planner"}
    listed = (await http.get("/groups", headers=auth(p["carol"]))).json()["groups"]
    assert [(g["group_id"], g["role"]) for g in listed] == [(group_id, "viewer")]
    assert (await http.get("/groups", headers=auth(p["dave"]))).json()["groups"] == []

    async def refused(method: str, path: str, user: str, status: int, code: str,
                      body: dict | None = None) -> dict:
        response = await http.request(method, path, json=body, headers=auth(user))
        assert response.status_code == status, response.text
        assert response.json()["error"]["code"] == code
        return response.json()["error"]

    base = f"/groups/{group_id}"
    # Not a member, or no such group: the same 404.
    await refused("GET", base, p["dave"], 404, "group_not_found")
    await refused("GET", f"{base}/runs", p["dave"], 404, "group_not_found")
    await refused("GET", f"/groups/{uuid.uuid4()}", p["alice"], 404, "group_not_found")
    await refused("POST", f"/groups/{uuid.uuid4()}/members", p["alice"], 404, "group_not_found",
                  {"user": p["dave"], "role": "viewer"})
    await refused("POST", f"{base}/members", p["dave"], 404, "group_not_found",
                  {"user": p["dave"], "role": "owner"})
    # Members who are not owners may not change members: 403 naming the rule.
    error = await refused("POST", f"{base}/members", p["bob"], 403, "not_allowed",
                          {"user": p["dave"], "role": "approver"})
    assert "'approver' may not change members" in error["message"]
    assert "'owner'" in error["message"]
    await refused("DELETE", f"{base}/members/{p['carol']}", p["bob"], 403, "not_allowed")
    # Bad input.
    await refused("POST", f"{base}/members", p["alice"], 422, "invalid_request",
                  {"user": p["dave"], "role": "Boss!"})
    await refused("POST", f"{base}/members", p["alice"], 422, "invalid_request",
                  {"user": "", "role": "viewer"})
    await refused("POST", "/groups", p["alice"], 422, "invalid_request", {"name": ""})
    await refused("GET", "/groups/not-a-uuid", p["alice"], 422, "invalid_request")
    await refused("DELETE", f"{base}/members/{p['dave']}", p["alice"], 404, "member_not_found")
    # The last owner can neither leave nor be demoted.
    await refused("DELETE", f"{base}/members/{p['alice']}", p["alice"], 409, "last_owner")
    await refused("POST", f"{base}/members", p["alice"], 409, "last_owner",
                  {"user": p["alice"], "role": "approver"})
    assert await members(http, group_id, p["alice"]) == before

    # A role change answers 200; a member may leave by itself.
    changed = await http.post(f"{base}/members", headers=auth(p["alice"]),
                              json={"user": p["carol"], "role": "approver"})
    assert changed.status_code == 200 and changed.json()["role"] == "approver"
    left = await http.delete(f"{base}/members/{p['erin']}", headers=auth(p["erin"]))
    assert left.status_code == 204
    assert p["erin"] not in await members(http, group_id, p["alice"])
    # The service role sees every group.
    every = (await http.get("/groups", headers=auth("ops", "service"))).json()["groups"]
    assert group_id in {g["group_id"] for g in every}


async def test_group_run_read_by_members_and_decided_by_the_roles_a_gate_allows(http, pool):
    p = people()
    group_id = await wedding(http, p)
    started = await http.post("/runs", headers=auth(p["alice"]), json={
        "kind": "validation", "group_id": group_id,
        "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]

    async def waiting() -> dict | None:
        run = (await http.get(f"/runs/{run_id}", headers=auth(p["bob"]))).json()
        return run if run.get("pending_checkpoint") == GATE else None
    run = await eventually(waiting, timeout=60)
    assert run["group_id"] == group_id and run["owner"] == p["alice"]
    assert run["pending_decision"]["decider_roles"] == ["owner", "approver"]

    # Every member reads the run, its events, snapshots and decisions; a stranger gets 404.
    for who in ("bob", "carol", "erin"):
        for path in ("", "/events", "/snapshots/latest", "/decisions"):
            response = await http.get(f"/runs/{run_id}{path}", headers=auth(p[who]))
            assert response.status_code == 200, (who, path, response.text)
        listed = (await http.get("/runs", headers=auth(p[who]))).json()["runs"]
        assert run_id in {r["run_id"] for r in listed}
    for path in ("", "/events", "/snapshots/latest", "/decisions"):
        response = await http.get(f"/runs/{run_id}{path}", headers=auth(p["dave"]))
        assert response.status_code == 404
    assert run_id not in {r["run_id"] for r in (
        await http.get("/runs", headers=auth(p["dave"]))).json()["runs"]}
    # The runs list filters by group: this group's run only, and none for another group.
    by_group = (await http.get("/runs", params={"group_id": group_id},
                               headers=auth(p["bob"]))).json()["runs"]
    assert [r["run_id"] for r in by_group] == [run_id]
    elsewhere = await http.get("/runs", params={"group_id": str(uuid.uuid4())},
                               headers=auth(p["bob"]))
    assert elsewhere.status_code == 200 and elsewhere.json()["runs"] == []
    bad = await http.get("/runs", params={"group_id": "not-a-uuid"}, headers=auth(p["bob"]))
    assert bad.status_code == 422

    # The group's runs, with where each stands.
    group_runs = (await http.get(f"/groups/{group_id}/runs?status=paused",
                                 headers=auth(p["carol"]))).json()["runs"]
    assert [(r["run_id"], r["pending_checkpoint"]) for r in group_runs] == [(run_id, GATE)]
    assert group_runs[0]["context_summary"] is None  # only agent runs keep one
    assert (await http.get(f"/groups/{group_id}/runs?status=completed",
                           headers=auth(p["carol"]))).json()["runs"] == []

    # The inbox shows the request to those who may decide it only.
    async def inbox(user: str) -> set[str]:
        decisions = (await http.get("/decisions", headers=auth(user))).json()["decisions"]
        return {d["run_id"] for d in decisions}
    assert run_id in await inbox(p["bob"])
    assert run_id not in await inbox(p["carol"]) | await inbox(p["erin"]) | await inbox(p["dave"])

    # A viewer (and a role the gate does not name) may not decide: 403 with the rule.
    path = f"/runs/{run_id}/decisions/{GATE}"
    for who, role in (("carol", "viewer"), ("erin", "planner")):
        refused = await http.post(path, headers=auth(p[who]), json={"decision": "approve"})
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "not_allowed"
        assert f"role {role!r} may not decide {GATE!r}" in error["message"]
        assert "owner or approver" in error["message"]
    refused = await http.post(f"/runs/{run_id}/cancel", headers=auth(p["carol"]))
    assert refused.status_code == 403
    stranger = await http.post(path, headers=auth(p["dave"]), json={"decision": "approve"})
    assert stranger.status_code == 404
    still = (await http.get(f"/runs/{run_id}", headers=auth(p["alice"]))).json()
    assert still["pending_decision"]["status"] == "pending"

    # Another member picks it up and decides it.
    decided = await http.post(path, headers=auth(p["bob"]),
                              json={"decision": "approve", "feedback": "go"})
    assert decided.status_code == 200, decided.text
    assert decided.json()["decided_by"] == p["bob"]
    async with pool.acquire() as conn:
        deciders = await conn.fetch("SELECT decision_by FROM hitl_requests WHERE run_id = $1",
                                    uuid.UUID(run_id))
    assert [r["decision_by"] for r in deciders] == [p["bob"]]


async def test_runs_start_in_a_group_only_for_members_who_are_not_viewers(http, pool):
    p = people()
    group_id = await wedding(http, p)
    body = {"kind": "validation", "group_id": group_id,
            "input": {"entrepreneur_input": IDEA, "gates": [GATE]}}
    async with pool.acquire() as conn:
        before = await conn.fetchval("SELECT count(*) FROM runs")
    viewer = await http.post("/runs", headers=auth(p["carol"]), json=body)
    assert viewer.status_code == 403 and viewer.json()["error"]["code"] == "not_allowed"
    stranger = await http.post("/runs", headers=auth(p["dave"]), json=body)
    assert stranger.status_code == 404
    assert stranger.json()["error"]["code"] == "group_not_found"
    unknown = await http.post("/runs", headers=auth(p["alice"]),
                              json={**body, "group_id": str(uuid.uuid4())})
    assert unknown.status_code == 404
    malformed = await http.post("/runs", headers=auth(p["alice"]),
                                json={**body, "group_id": "wedding"})
    assert malformed.status_code == 422
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM runs") == before
    # The same Idempotency-Key for another group is a conflict.
    key = {"Idempotency-Key": uuid.uuid4().hex}
    first = await http.post("/runs", headers={**auth(p["erin"]), **key}, json=body)
    assert first.status_code == 201, first.text
    again = await http.post("/runs", headers={**auth(p["erin"]), **key},
                            json={**body, "group_id": None})
    assert again.status_code == 409


async def test_member_inbox_stream_gets_group_requests(http):
    p = people()
    group_id = await wedding(http, p)
    seen: list[SseEvent] = []

    async def follow(user: str, into: list[SseEvent]) -> None:
        async with http.stream("GET", "/decisions/stream", headers=auth(user)) as response:
            assert response.status_code == 200
            async for event in sse_events(response):
                into.append(event)
    viewer_seen: list[SseEvent] = []
    followers = [asyncio.create_task(follow(p["bob"], seen)),
                 asyncio.create_task(follow(p["carol"], viewer_seen))]
    try:
        await eventually(lambda: asyncio.sleep(0, all(
            any(e.event == "decision.snapshot_done" for e in s) for s in (seen, viewer_seen))))
        started = await http.post("/runs", headers=auth(p["alice"]), json={
            "kind": "validation", "group_id": group_id,
            "input": {"entrepreneur_input": IDEA, "gates": [GATE]}})
        run_id = started.json()["run_id"]
        await eventually(lambda: asyncio.sleep(0, any(
            e.event == "decision.pending" and e.data["run_id"] == run_id for e in seen)),
            timeout=60)
        decided = await http.post(f"/runs/{run_id}/decisions/{GATE}", headers=auth(p["bob"]),
                                  json={"decision": "approve"})
        assert decided.status_code == 200
        await eventually(lambda: asyncio.sleep(0, any(
            e.event == "decision.closed" and e.data["run_id"] == run_id for e in seen)))
        # The viewer may read the run but is not asked to decide it.
        assert not any(e.data and e.data.get("run_id") == run_id for e in viewer_seen
                       if isinstance(e.data, dict))
    finally:
        for follower in followers:
            follower.cancel()
        await asyncio.gather(*followers, return_exceptions=True)


async def test_a_gate_naming_its_roles_reaches_exactly_those_members(pool):
    """A gate's decider_roles go from the write to the row, the inbox query and the NOTIFY
    that wakes inbox streams."""
    from waystation.api.event_hub import InboxSubscription
    from waystation.contracts.writes import GateOpenWrite, GateOption, ReadModelWrite
    from waystation.persistence import gates as gates_repo
    from waystation.persistence import groups as groups_repo
    from waystation.persistence.runs import create_run
    from waystation.persistence.writes import apply_write

    p = people()
    group_id, run_id = uuid.uuid4(), uuid.uuid4()
    notes: asyncio.Queue[str] = asyncio.Queue()
    async with pool.acquire() as conn:
        await groups_repo.create_group(conn, group_id=group_id, name="Venue", creator=p["alice"])
        for who, role in (("bob", "approver"), ("erin", "planner")):
            await groups_repo.put_member(conn, group_id=group_id, user=p[who], role=role,
                                         added_by=p["alice"])
        await create_run(conn, run_id=run_id, kind="validation", owner=p["alice"],
                         group_id=group_id, workflow_id=f"validation-{run_id}",
                         idempotency_key=None, input={})
        def heard(*args: object) -> None:
            notes.put_nowait(str(args[-1]))
        await conn.add_listener("waystation_gates", heard)
        try:
            await apply_write(conn, ReadModelWrite(run_id=run_id, open_gate=GateOpenWrite(
                id=uuid.uuid4(), checkpoint_name="pick_venue", phase=0, title="Venue?",
                description="Pick one", options=[GateOption(value="a", label="A")],
                digest="0" * 64, decider_roles=["planner"])))
            payload = await asyncio.wait_for(notes.get(), timeout=5)
        finally:
            await conn.remove_listener("waystation_gates", heard)
        planner = await gates_repo.list_inbox(conn, owner=p["erin"], status="pending", limit=10)
        approver = await gates_repo.list_inbox(conn, owner=p["bob"], status="pending", limit=10)
    assert [g.checkpoint_name for g in planner] == ["pick_venue"]
    assert planner[0].decider_roles == ["planner"]
    assert approver == []
    change = json.loads(payload)
    assert change["group_id"] == str(group_id) and change["decider_roles"] == ["planner"]
    assert InboxSubscription(owner=p["erin"], group_roles={str(group_id): "planner"}
                             ).concerns(change)
    assert not InboxSubscription(owner=p["bob"], group_roles={str(group_id): "approver"}
                                 ).concerns(change)
    assert InboxSubscription(owner=p["alice"]).concerns(change)
