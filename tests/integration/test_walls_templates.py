"""Templates with a budget: a render is bounded in loop turns, output and time, runs off the
worker's event loop, and what exceeds its budget fails the item, not the worker nor anybody
else's run (issue 25, item 2)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from kinds.batch.activities.templates import (
    MAX_LOOP_NESTING,
    MAX_OUTPUT_CHARS,
    OverBudget,
    TemplateProblem,
    check_template,
    evaluate,
    render,
)
from tests.helpers import IDEA, eventually
from tests.integration.test_api import auth, settings  # noqa: F401 - the settings fixture
from tests.integration.test_batch_api import api, submit, wait_status  # noqa: F401 - the api fixture

REPRODUCTION = ('{% for a in "x" * 20000 %}{% for b in "x" * 20000 %}{{ b }}{% endfor %}'
                '{% endfor %}')


@pytest.mark.parametrize(("source", "budget"), [
    (REPRODUCTION, "loop turns"),
    ("{{ item.text * 10000000 }}", "a value over"),
    ("{% for i in range(90000) %}{{ item.text }}{% endfor %}", "output over"),
    ("{{ 2 ** 10000000 }}", "an exponent over"),
], ids=["nested-loops", "multiplied", "long-output", "exponent"])
def test_a_render_past_its_budget_stops_with_the_budget_it_broke(source, budget) -> None:
    started = time.monotonic()
    with pytest.raises(OverBudget, match=budget):
        render(source, {"text": "x" * 50}, {})
    assert time.monotonic() - started < 1


def test_a_branch_condition_cannot_build_a_huge_value() -> None:
    with pytest.raises(OverBudget, match="a value over"):
        evaluate(f"output * {MAX_OUTPUT_CHARS}", {}, {}, "ab")


def test_deep_and_recursive_loops_are_refused_at_submit() -> None:
    deep = "{% for a in item.x %}" * (MAX_LOOP_NESTING + 1) + "{% endfor %}" * (
        MAX_LOOP_NESTING + 1)
    with pytest.raises(TemplateProblem, match="loops nested over"):
        check_template(deep, earlier_steps=[], all_steps=["s"])
    with pytest.raises(TemplateProblem, match="recursive loops"):
        check_template("{% for a in item.x recursive %}{{ a }}{% endfor %}",
                       earlier_steps=[], all_steps=["s"])
    check_template(REPRODUCTION, earlier_steps=[], all_steps=["s"])


def test_loops_within_the_budget_render_as_before() -> None:
    source = "{% for w in item.words %}{% for c in w %}{{ c }}.{% endfor %} {% endfor %}"
    assert render(source, {"words": ["ab", "c"]}, {}) == "a.b. c. "


async def test_the_reproduction_fails_its_item_and_another_users_run_is_not_slowed(
        api) -> None:  # noqa: F811
    job = await submit(api, items=[{"text": "x"}, {"text": "y"}],
                       steps=[{"name": "s", "template": REPRODUCTION}])
    assert job.status_code == 201, job.text
    job_id = job.json()["run_id"]
    run = await api.post("/runs", headers=auth("bob"), json={
        "kind": "validation", "input": {"entrepreneur_input": IDEA}})
    assert run.status_code == 201, run.text
    run_id = run.json()["run_id"]

    await wait_status(api, job_id, "failed", "completed")
    failed = (await api.get(f"/jobs/{job_id}/items", params={"status": "failed"},
                            headers=auth())).json()["items"]
    assert len(failed) == 2
    assert all("template over budget: more than" in item["error"] for item in failed)

    async def gate_open() -> list | None:
        state = (await api.get(f"/runs/{run_id}", headers=auth("bob"))).json()
        if state["pending_checkpoint"] is None:
            return None
        return (await api.get(f"/runs/{run_id}/events?limit=1000",
                              headers=auth("bob"))).json()["events"]
    events = await eventually(gate_open, timeout=40)
    times = [datetime.fromisoformat(e["created_at"]) for e in events]
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(
        times, times[1:], strict=False)]
    assert max(gaps) < 1, gaps
