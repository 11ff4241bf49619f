"""Decision analytics end to end (issue 42): real API, dev server, Postgres and a worker with
the planner agent, whose bookings wait at a tool approval. The figures come from the daily
roll-ups kept by a trigger as requests close; a person's own from the requests themselves; a
user sees figures only of what they may read; GET /metrics has the histogram per gate."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.helpers import eventually
from tests.integration.test_decision_policies import (  # noqa: F401 - the `http` fixture
    LARGE,
    SMALL,
    auth,
    book,
    http,
)
from tests.integration.test_decision_policies import approval as pending

GATE = "approve_book_vendor"


async def decide(client: httpx.AsyncClient, user: str, run_id: str, option: str) -> None:
    request = await pending(client, user, run_id)
    decided = await client.post(f"/runs/{run_id}/decisions/{request['checkpoint_name']}",
                              json={"decision": option}, headers=auth(user))
    assert decided.status_code == 200, decided.text


async def figures(client: httpx.AsyncClient, user: str, **params: Any) -> dict[str, Any]:
    answer = await client.get("/analytics/decisions", params={"kind": "agent", **params},
                            headers=auth(user))
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_figures_per_gate_and_day_over_what_the_caller_may_read(http, pool):  # noqa: F811
    tag = uuid.uuid4().hex[:6]
    maya, omar = f"maya-{tag}", f"omar-{tag}"
    made = await http.post("/policies", headers=auth(maya), json={
        "name": "small", "kind": "agent", "condition":
            'request.tool.name == "book_vendor" && request.tool.args.guests <= 50',
        "decision": {"decision": "approve", "feedback": "small"}})
    assert made.status_code == 201, made.text
    shadow = await http.post("/policies", headers=auth(maya), json={
        "name": "watch", "kind": "agent", "mode": "shadow", "condition": "true",
        "decision": {"decision": "approve"}})
    assert shadow.status_code == 201, shadow.text
    await book(http, maya, SMALL)  # the policy approves it
    approved, rejected = await book(http, maya, LARGE), await book(http, maya, LARGE)
    waiting = await book(http, maya, LARGE)
    await decide(http, maya, approved, "approve")
    await decide(http, maya, rejected, "reject")
    await pending(http, maya, waiting)

    async def counted() -> dict[str, Any] | None:
        found = await figures(http, maya)
        return found if found["totals"]["decided"] == 3 else None
    mine = await eventually(counted)
    assert mine["source"] == "rollup"
    totals = mine["totals"]
    assert (totals["approved"], totals["rejected"], totals["policy_decisions"]) == (2, 1, 1)
    # The gate recommends approving: one rejection overruled it, of three decided.
    assert (totals["overruled"], totals["overruled_rate"]) == (1, 1 / 3)
    assert mine["pending_now"] == 1 and mine["overdue_now"] == 0
    # The shadow policy would have approved all three people's... two people decided.
    assert mine["shadow"] == {"compared": 2, "agreed": 1, "rate": 0.5}
    [gate] = mine["by_gate"]
    assert (gate["kind"], gate["gate"], gate["decided"]) == ("agent", GATE, 3)
    times = gate["time_to_decide"]
    assert times["p50"] is not None and 0 <= times["p50"] <= times["p90"] <= times["p99"] < 600
    [day] = mine["per_day"]
    assert day["decided"] == 3 and day["time_to_decide"]["p99"] == times["p99"]
    assert (await figures(http, maya, checkpoint=f"{GATE}_1"))["totals"]["decided"] == 3
    assert (await figures(http, maya, checkpoint="another_gate"))["totals"]["decided"] == 0

    # A person's own decisions: from the requests, with exact percentiles.
    hers = await figures(http, maya, person=maya)
    assert hers["source"] == "requests"
    assert (hers["totals"]["decided"], hers["totals"]["policy_decisions"]) == (2, 0)
    policy = await figures(http, maya, person="policy:small@1")
    assert policy["totals"]["approved"] == 1

    # Another user sees none of maya's figures, by any filter.
    await decide(http, omar, await book(http, omar, LARGE), "approve")
    for params in ({}, {"person": maya}, {"checkpoint": GATE}):
        theirs = await figures(http, omar, **params)
        assert theirs["totals"]["decided"] == (1 if "person" not in params else 0)
        assert theirs["shadow"]["compared"] == 0 and theirs["pending_now"] == 0

    bad = await http.get("/analytics/decisions", params={"window": 0}, headers=auth(maya))
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    both = await http.get("/analytics/decisions", headers=auth(maya),
                          params={"window": 3, "since": "2026-01-01T00:00:00Z"})
    assert both.status_code == 422

    metrics = (await http.get("/metrics", headers=auth("ops", "service"))).text
    lines = [line for line in metrics.splitlines()
             if line.startswith("waystation_time_to_decide_seconds_count{")
             and f'gate="{GATE}"' in line and 'kind="agent"' in line]
    assert lines and float(lines[0].rsplit(" ", 1)[1]) >= 4


async def test_a_group_s_figures_are_its_members_and_not_a_removed_one_s(http,  # noqa: F811
                                                                        pool):
    tag = uuid.uuid4().hex[:6]
    alice, bob = f"alice-{tag}", f"bob-{tag}"
    group_id = (await http.post("/groups", json={"name": "Venues"},
                                headers=auth(alice))).json()["group_id"]
    added = await http.post(f"/groups/{group_id}/members", headers=auth(alice),
                            json={"user": bob, "role": "approver"})
    assert added.status_code == 201, added.text
    run_id = await book(http, alice, LARGE, group_id=group_id)
    await decide(http, bob, run_id, "approve")

    async def counted() -> dict[str, Any] | None:
        found = await figures(http, bob, group_id=group_id)
        return found if found["totals"]["decided"] == 1 else None
    await eventually(counted)
    removed = await http.delete(f"/groups/{group_id}/members/{bob}", headers=auth(alice))
    assert removed.status_code == 204, removed.text
    gone = await figures(http, bob, group_id=group_id)
    assert gone["totals"]["decided"] == 0 and gone["by_gate"] == []
    assert (await figures(http, bob, person=bob))["totals"]["decided"] == 0
