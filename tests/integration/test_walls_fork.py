"""Issue 38 item 4: forking a group's run with a decision is deciding, and a fork spends the
source's project only for a caller who may act on the source (real Postgres, dev server)."""

from __future__ import annotations

import uuid

import asyncpg
import httpx

from tests.helpers import IDEA
from tests.inprocess_api import auth, wait_pending

BRIEF = "approve_founders_brief"


async def _group_run(api: httpx.AsyncClient, p: dict[str, str]) -> tuple[str, str]:
    """alice's group (bob approves, carol views) and a run of it in project `wedding-<tag>`,
    waiting at its first gate."""
    group = await api.post("/groups", json={"name": "Forks"}, headers=auth(p["alice"]))
    group_id = group.json()["group_id"]
    for who, role in (("bob", "approver"), ("carol", "viewer")):
        added = await api.post(f"/groups/{group_id}/members", headers=auth(p["alice"]),
                               json={"user": p[who], "role": role})
        assert added.status_code == 201, added.text
    started = await api.post("/runs", headers=auth(p["alice"]), json={
        "kind": "validation", "group_id": group_id, "project_id": p["project"],
        "input": {"entrepreneur_input": IDEA, "gates": [BRIEF]}})
    assert started.status_code == 201, started.text
    run_id = started.json()["run_id"]
    await wait_pending(api, run_id, BRIEF, user=p["alice"])
    return group_id, run_id


async def test_a_viewer_may_not_fork_with_a_decision_and_spends_no_project(
        api, pool: asyncpg.Pool):
    tag = uuid.uuid4().hex[:6]
    p = {name: f"{name}-{tag}" for name in ("alice", "bob", "carol", "dave")}
    p["project"] = f"wedding-{tag}"
    _, source = await _group_run(api, p)
    amend = {"from": {"checkpoint": BRIEF}, "decision": {"decision": "reject"}}

    async def runs_written() -> int:
        async with pool.acquire() as conn:
            return await conn.fetchval("SELECT count(*) FROM runs WHERE owner = ANY($1)",
                                       [p["carol"], p["dave"]])

    refused = await api.post(f"/runs/{source}/fork", json=amend, headers=auth(p["carol"]))
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "not_allowed" and error["details"][0]["role"] == "viewer", error
    # The same refusal as deciding the source's gate itself.
    decide = await api.post(f"/runs/{source}/decisions/{BRIEF}", json={"decision": "reject"},
                            headers=auth(p["carol"]))
    assert decide.status_code == 403 and decide.json()["error"]["code"] == "not_allowed"
    hidden = await api.post(f"/runs/{source}/fork", json=amend, headers=auth(p["dave"]))
    assert hidden.status_code == 404, hidden.text
    assert await runs_written() == 0

    # Without a decision a viewer may fork (it only reads), into no project and no group.
    plain = await api.post(f"/runs/{source}/fork", json={"from": {"checkpoint": BRIEF}},
                           headers=auth(p["carol"]))
    assert plain.status_code == 201, plain.text
    view = (await api.get(f"/runs/{plain.json()['run_id']}", headers=auth(p["carol"]))).json()
    assert view["owner"] == p["carol"] and view["group_id"] is None
    assert view["project_id"] is None


async def test_a_decider_forks_with_a_decision_into_the_source_s_project(api):
    tag = uuid.uuid4().hex[:6]
    p = {name: f"{name}-{tag}" for name in ("alice", "bob", "carol")}
    p["project"] = f"wedding-{tag}"
    _, source = await _group_run(api, p)
    amend = {"from": {"checkpoint": BRIEF}, "decision": {"decision": "reject"}}
    for who in ("bob", "alice"):  # the group's approver, the run's owner
        forked = await api.post(f"/runs/{source}/fork", json=amend, headers=auth(p[who]))
        assert forked.status_code == 201, (who, forked.text)
        view = (await api.get(f"/runs/{forked.json()['run_id']}", headers=auth(p[who]))).json()
        assert view["owner"] == p[who] and view["project_id"] == p["project"], view
        assert view["forked_from"]["decision"]["decided_by"] == p[who]
