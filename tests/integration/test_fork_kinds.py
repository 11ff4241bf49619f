"""Issue 29's fork for the batch and mobile kinds over HTTP (real Postgres, dev server,
in-process worker): a batch job forked over chosen items from a chosen step, from a snapshot
and from a gate it still waits at; a mobile run forked from a step's snapshot; and every
refusal writing nothing."""

from __future__ import annotations

import asyncpg
import httpx

from tests.helpers import eventually
from tests.inprocess_api import auth
from tests.integration.test_batch_steps import (  # noqa: F401 - the api and its fixtures
    _never_fails,
    api,
    backend,
    finished_job,
    outputs_of,
)

TEST_GATE = "test_unit_failed"


async def _fork(api: httpx.AsyncClient, run_id: str, body: dict,  # noqa: F811
                user: str = "alice") -> httpx.Response:
    return await api.post(f"/runs/{run_id}/fork", json=body, headers=auth(user))


async def _events(api: httpx.AsyncClient, run_id: str) -> list[dict]:  # noqa: F811
    page = await api.get(f"/runs/{run_id}/events?limit=1000", headers=auth())
    return page.json()["events"]


async def _snapshot(api: httpx.AsyncClient, run_id: str, label: str) -> int:  # noqa: F811
    heads = (await api.get(f"/runs/{run_id}/snapshots", headers=auth())).json()["snapshots"]
    return next(h["step_ordinal"] for h in heads if h["label"] == label)


async def _finished(api: httpx.AsyncClient, job_id: str):  # noqa: F811
    job = (await api.get(f"/jobs/{job_id}", headers=auth())).json()
    return job if job.get("status") in ("completed", "failed") else None


async def _run_count(pool: asyncpg.Pool) -> int:
    async with pool.acquire() as conn:
        return await conn.fetchval("SELECT count(*) FROM runs")


async def test_batch_fork_reruns_chosen_items_from_a_step(api, backend):  # noqa: F811
    source = await finished_job(api)
    items = (await api.get(f"/jobs/{source}/items", headers=auth())).json()["items"]
    failed, completed = items[1], items[2]
    completed_at = await _snapshot(api, source, "completed")
    source_events = await _events(api, source)
    backend.rule = _never_fails  # the grader works now

    body = {"from": {"snapshot": completed_at},
            "input": {"items": [completed["item_id"], failed["item_id"]], "from_step": "grade"}}
    forked = await _fork(api, source, body)
    assert forked.status_code == 201, forked.text
    assert forked.json()["kind"] == "batch"
    fork_id = forked.json()["run_id"]
    new_job = await eventually(lambda: _finished(api, fork_id), timeout=40)
    assert new_job["counts"] == {"completed": 2}
    view = (await api.get(f"/runs/{fork_id}", headers=auth())).json()
    assert view["forked_from"] == {"run_id": source, "snapshot": completed_at,
                                   "checkpoint": None, "decision": None}
    assert view["input"]["retry_of"] == source and view["input"]["rerun_from"] == "grade"
    events = await _events(api, fork_id)
    assert events[0]["type"] == "run.started"
    assert events[0]["output"]["forked_from"]["run_id"] == source

    # The rerun's job: the items in the job's order, their summarize output kept, grade re-run.
    new_items = (await api.get(f"/jobs/{fork_id}/items", headers=auth())).json()["items"]
    assert [i["payload"]["text"] for i in new_items] == ["two FAIL", "three"]
    for old, new in ((failed, new_items[0]), (completed, new_items[1])):
        before, after = await outputs_of(api, old["item_id"]), \
            await outputs_of(api, new["item_id"])
        assert after["summarize"]["output"] == before["summarize"]["output"]
        assert [r.task for r in backend.requests if r.item_id == new["item_id"]] == \
            ["grade", "publish"]
    # The source never moves.
    assert (await api.get(f"/jobs/{source}", headers=auth())).json()["counts"] == \
        {"completed": 3, "failed": 2}
    assert await _events(api, source) == source_events

    # By default: every item, from the first step (nothing kept).
    everything = await _fork(api, source, {"from": {"snapshot": completed_at}})
    assert everything.status_code == 201, everything.text
    run = (await api.get(f"/runs/{everything.json()['run_id']}", headers=auth())).json()
    assert len(run["input"]["items"]) == 5 and run["input"]["kept_outputs"] is None


async def test_batch_fork_refusals_name_the_field_and_write_nothing(api, pool):  # noqa: F811
    source = await finished_job(api)
    completed_at = await _snapshot(api, source, "completed")
    before = await _run_count(pool)
    unknown = "00000000-0000-4000-8000-000000000000"
    cases = [
        ({"input": {"from_step": "review"}}, ["body", "input", "from_step"], "'review'"),
        ({"input": {"items": [unknown]}}, ["body", "input", "items", 0], unknown),
        ({"input": {"items": []}}, ["body", "input", "items"], "at least 1"),
        ({"input": {"max_workers": 3}}, ["body", "input", "max_workers"], "not permitted"),
        ({"decision": {"decision": "proceed"}}, ["body", "decision"], "not taken at a gate"),
    ]
    for body, loc, said in cases:
        refused = await _fork(api, source, {"from": {"snapshot": completed_at}, **body})
        assert refused.status_code == 422, (body, refused.text)
        error = refused.json()["error"]
        assert error["details"][0]["loc"] == loc, (body, error)
        assert said in error["message"], (body, error)
    hidden = await _fork(api, source, {"from": {"snapshot": completed_at}}, user="bob")
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "run_not_found"
    assert await _run_count(pool) == before


async def test_batch_fork_of_a_waiting_job_applies_a_decision(api):  # noqa: F811
    created = await api.post("/runs", headers=auth(), json={"kind": "batch", "input": {
        "name": "postings", "test_first": True, "max_retries": 0, "failure_threshold": 0.9,
        "items": [{"text": "two FAIL", "short": False}, {"text": "three", "short": False}],
        "steps": [{"name": "summarize", "template": "Summarize: {{ item.text }}"},
                  {"name": "grade", "template": "Grade: {{ outputs.summarize }}"}]}})
    assert created.status_code == 201, created.text
    source = created.json()["run_id"]

    async def waiting(run_id: str):
        run = (await api.get(f"/runs/{run_id}", headers=auth())).json()
        return run if run["pending_checkpoint"] == TEST_GATE else None
    pending = (await eventually(lambda: waiting(source), timeout=40))["pending_decision"]
    source_events = await _events(api, source)

    # The fork's test item fails at grade again; its gate takes the amended decision at once.
    forked = await _fork(api, source, {"from": {"checkpoint": TEST_GATE},
                                       "decision": {"decision": "proceed"},
                                       "input": {"from_step": "grade"}})
    assert forked.status_code == 201, forked.text
    fork_id = forked.json()["run_id"]
    job = await eventually(lambda: _finished(api, fork_id), timeout=40)
    assert job["status"] == "completed" and job["counts"] == {"failed": 1, "completed": 1}
    decisions = (await api.get(f"/runs/{fork_id}/decisions", headers=auth())).json()
    assert [(d["checkpoint_name"], d["decision"], d["decided_by"])
            for d in decisions["decisions"]] == [(TEST_GATE, "proceed", "alice")]
    view = (await api.get(f"/runs/{fork_id}", headers=auth())).json()
    assert view["forked_from"]["checkpoint"] == TEST_GATE
    assert view["forked_from"]["decision"]["decision"] == "proceed"

    # The source still waits on the same request, nothing written to it.
    still = (await api.get(f"/runs/{source}", headers=auth())).json()
    assert still["pending_decision"]["request_id"] == pending["request_id"]
    assert await _events(api, source) == source_events
    refused = await _fork(api, source, {"from": {"checkpoint": TEST_GATE},
                                        "decision": {"decision": "maybe"}})
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "unknown_option"


NOTES = "com.waystation.sample.notes"


async def _mobile_done(api: httpx.AsyncClient, run_id: str):  # noqa: F811
    run = (await api.get(f"/runs/{run_id}", headers=auth())).json()
    return run if run["status"] in ("completed", "failed") else None


async def test_mobile_fork_carries_the_graph_on_from_a_step(api, pool):  # noqa: F811
    started = await api.post("/runs", headers=auth(), json={"kind": "mobile_agent", "input": {
        "app_package": NOTES, "max_steps": 30, "sensitive_actions": "skip"}})
    assert started.status_code == 201, started.text
    source = started.json()["run_id"]
    assert (await eventually(lambda: _mobile_done(api, source), timeout=60))["status"] == \
        "completed"
    at = await _snapshot(api, source, "step 12")
    stood = (await api.get(f"/runs/{source}/snapshots/{at}", headers=auth())).json()["state"]
    source_graph = (await api.get(f"/runs/{source}/graph", headers=auth())).json()
    source_events = await _events(api, source)

    forked = await _fork(api, source, {"from": {"snapshot": at}, "input": {"max_steps": 40}})
    assert forked.status_code == 201, forked.text
    fork_id = forked.json()["run_id"]
    fork = await eventually(lambda: _mobile_done(api, fork_id), timeout=60)
    assert fork["status"] == "completed" and fork["result"]["steps"] == 40
    assert fork["forked_from"] == {"run_id": source, "snapshot": at, "checkpoint": None,
                                   "decision": None}
    events = await _events(api, fork_id)
    assert events[0]["type"] == "run.started"
    assert events[0]["output"]["forked_from"]["run_id"] == source

    async with pool.acquire() as conn:
        def steps_of(run_id: str):
            return conn.fetch("SELECT step, screen_id, from_screen_id, action_id, new_screen "
                              "FROM graph_persistence_outcomes WHERE run_id = $1 ORDER BY step",
                              run_id)
        theirs, ours = await steps_of(source), await steps_of(fork_id)
    # The fork's graph starts with the source's first 12 steps (their discoveries stay the
    # source's), then carries on from step 13 with a relaunch.
    assert [tuple(r)[:4] for r in ours[:12]] == [tuple(r)[:4] for r in theirs[:12]]
    assert not any(r["new_screen"] for r in ours[:12])
    assert [r["step"] for r in ours] == list(range(1, 41))
    # It walks back to the screen the source stood at, then explores from there.
    back = [e for e in events if (e.get("output") or {}).get("why", "")
            .startswith("back to the fork's screen")]
    assert back and ours[12 + len(back)]["screen_id"] == stood["screen_id"]
    assert ours[12]["screen_id"] == ours[0]["screen_id"] != stood["screen_id"]
    graph = (await api.get(f"/runs/{fork_id}/graph", headers=auth())).json()
    ids = [s["id"] for s in graph["screens"]]
    assert len(ids) == len(set(ids))
    edges = [(e["from"], e["to"], e.get("action_id")) for e in graph["edges"]]
    assert len(edges) == len(set(edges))
    assert {r["screen_id"] for r in theirs[:12] if r["screen_id"]} <= set(ids)
    # The source is untouched (the screens are the app's: their visit counts are not).
    def walked(graph: dict) -> tuple:
        return ([s["id"] for s in graph["screens"]],
                [(e["from"], e["to"], e["count"]) for e in graph["edges"]])
    again = (await api.get(f"/runs/{source}/graph", headers=auth())).json()
    assert walked(again) == walked(source_graph)
    assert await _events(api, source) == source_events

    before = await _run_count(pool)
    for body, loc in [({"input": {"max_steps": 12}}, ["body", "input", "max_steps"]),
                      ({"input": {"app_package": "com.waystation.sample.shop"}},
                       ["body", "input", "app_package"]),
                      ({"input": {"persist": False}}, ["body", "input", "persist"])]:
        refused = await _fork(api, source, {"from": {"snapshot": at}, **body})
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["error"]["details"][0]["loc"] == loc, refused.json()
    assert (await _fork(api, source, {"from": {"snapshot": at}}, user="bob")).status_code == 404
    assert await _run_count(pool) == before


async def test_a_member_removed_from_the_group_cannot_fork(api, pool):  # noqa: F811
    group = await api.post("/groups", json={"name": "Postings"}, headers=auth())
    assert group.status_code == 201, group.text
    group_id = group.json()["group_id"]
    added = await api.post(f"/groups/{group_id}/members", headers=auth(),
                           json={"user": "bob", "role": "approver"})
    assert added.status_code == 201, added.text
    created = await api.post("/runs", headers=auth(), json={
        "kind": "batch", "group_id": group_id,
        "input": {"name": "postings", "items": [{"text": "one", "short": True}],
                  "steps": [{"name": "summarize", "template": "Summarize: {{ item.text }}"}]}})
    assert created.status_code == 201, created.text
    source = created.json()["run_id"]
    await eventually(lambda: _finished(api, source), timeout=40)
    at = await _snapshot(api, source, "completed")

    # A member reads the group's job, so may fork it: the fork is theirs.
    forked = await _fork(api, source, {"from": {"snapshot": at}}, user="bob")
    assert forked.status_code == 201, forked.text
    fork = (await api.get(f"/runs/{forked.json()['run_id']}", headers=auth("bob"))).json()
    assert fork["owner"] == "bob" and fork["forked_from"]["run_id"] == source

    removed = await api.delete(f"/groups/{group_id}/members/bob", headers=auth())
    assert removed.status_code in (200, 204), removed.text
    before = await _run_count(pool)
    refused = await _fork(api, source, {"from": {"snapshot": at}}, user="bob")
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "run_not_found"
    assert await _run_count(pool) == before


async def test_mobile_fork_of_a_run_waiting_at_a_sensitive_action(api, pool):  # noqa: F811
    started = await api.post("/runs", headers=auth(), json={"kind": "mobile_agent", "input": {
        "app_package": "com.waystation.sample.shop", "max_steps": 60, "seed": 1}})
    assert started.status_code == 201, started.text
    source = started.json()["run_id"]

    async def waiting():
        run = (await api.get(f"/runs/{source}", headers=auth())).json()
        return run if run["pending_checkpoint"] else None
    run = await eventually(waiting, timeout=60)
    checkpoint, request_id = run["pending_checkpoint"], run["pending_decision"]["request_id"]
    at_gate = (await api.get(f"/runs/{source}/snapshots/latest", headers=auth())).json()
    source_events = await _events(api, source)

    refused = await _fork(api, source, {"from": {"checkpoint": checkpoint},
                                        "decision": {"decision": "approve"}})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"][0]["loc"] == ["body", "decision"]
    forked = await _fork(api, source, {"from": {"checkpoint": checkpoint},
                                       "input": {"sensitive_actions": "skip"}})
    assert forked.status_code == 201, forked.text
    fork_id = forked.json()["run_id"]
    fork = await eventually(lambda: _mobile_done(api, fork_id), timeout=60)
    assert fork["status"] == "completed" and fork["forked_from"]["checkpoint"] == checkpoint
    async with pool.acquire() as conn:
        copied = await conn.fetchval("SELECT max(step) FROM graph_persistence_outcomes "
                                     "WHERE run_id = $1 AND NOT new_screen AND step <= $2",
                                     fork_id, at_gate["state"]["step"])
    assert copied == at_gate["state"]["step"]
    # The source still waits on the same request; nothing was written to it.
    still = (await api.get(f"/runs/{source}", headers=auth())).json()
    assert still["pending_decision"]["request_id"] == request_id
    assert await _events(api, source) == source_events
