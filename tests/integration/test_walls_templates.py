"""Templates with a budget: a render is bounded in loop turns, output and time, runs off the
worker's event loop, and what exceeds its budget fails the item, not the worker nor anybody
else's run (issue 25, item 2)."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import pytest

from tests.helpers import IDEA, eventually
from tests.inprocess_api import auth
from tests.integration.test_batch_api import api, submit, wait_status  # noqa: F401 - the api fixture
from waystation.kinds.batch.activities.render_process import (
    KILL_AFTER_SECONDS,
    evaluate_bounded,
    render_bounded,
)
from waystation.kinds.batch.activities.templates import (
    MAX_LOOP_NESTING,
    MAX_OUTPUT_CHARS,
    OverBudget,
    TemplateProblem,
    check_template,
    evaluate,
    render,
)

REPRODUCTION = ('{% for a in "x" * 20000 %}{% for b in "x" * 20000 %}{{ b }}{% endfor %}'
                '{% endfor %}')
# The same loops over an item's data: only the render can find them over budget.
OVER_DATA = "{% for a in item.text %}{% for b in item.text %}{{ b }}{% endfor %}{% endfor %}"
# One call each, which no check inside the render reaches: the render process's memory cap
# or its kill stops them.
SINGLE_CALLS = {
    "padding": '{{ "x"|center(1000000000) }}',
    "percent-width": '{{ "%01000000000d" % 1 }}',
    "nested-list": "{% set a = [item.text, item.text] %}" + "".join(
        f"{{% set {b} = [{a}, {a}] %}}" for a, b in zip("abcdefghijklmnop", "bcdefghijklmnopq",
                                                        strict=True)) + "{{ q }}",
    "power-tower": "{{ ((2 ** 4096) ** 4096) ** 4096 }}",
}


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
    check_template(OVER_DATA, earlier_steps=[], all_steps=["s"])


def test_loops_over_written_values_past_the_budget_are_refused_at_submit() -> None:
    with pytest.raises(TemplateProblem, match="would turn 400000000 times"):
        check_template(REPRODUCTION, earlier_steps=[], all_steps=["s"])
    with pytest.raises(TemplateProblem, match="would turn 200000 times"):
        check_template('{% for a in "ab" * 100000 %}{% endfor %}', earlier_steps=[],
                       all_steps=["s"])
    # Within the budget, or over data (which the render counts): kept.
    check_template('{% for a in [1, 2, 3] %}{% for b in "ab" * 10 %}{{ b }}{% endfor %}'
                   '{% endfor %}', earlier_steps=[], all_steps=["s"])


@pytest.mark.parametrize("source", SINGLE_CALLS.values(), ids=SINGLE_CALLS.keys())
async def test_a_single_huge_call_fails_the_render_not_the_worker(source) -> None:
    started = time.monotonic()
    with pytest.raises(OverBudget, match="template over budget: (more than 512 MiB of memory|"
                                         "rendering took over)"):
        await render_bounded(source, {"text": "x" * 20000}, {})
    assert time.monotonic() - started < KILL_AFTER_SECONDS + 1
    # The next render gets a working process.
    assert await render_bounded("{{ item.text }}!", {"text": "ok"}, {}) == "ok!"


async def test_any_failure_of_a_render_or_condition_is_a_template_problem() -> None:
    with pytest.raises(TemplateProblem, match="template failed: ZeroDivisionError"):
        await render_bounded("{{ 1 / 0 }}", {}, {})
    with pytest.raises(OverBudget, match="a value over"):
        await evaluate_bounded(f"output * {MAX_OUTPUT_CHARS}", {}, {}, "ab")
    assert await evaluate_bounded("'b' in output", {}, {}, "ab") is True


def test_loops_within_the_budget_render_as_before() -> None:
    source = "{% for w in item.words %}{% for c in w %}{{ c }}.{% endfor %} {% endfor %}"
    assert render(source, {"words": ["ab", "c"]}, {}) == "a.b. c. "


async def test_the_reproduction_fails_its_item_and_another_users_run_is_not_slowed(
        api, pool) -> None:  # noqa: F811
    jobs_before = await pool.fetchval("SELECT count(*) FROM jobs")
    refused = await submit(api, items=[{"text": "x"}],
                           steps=[{"name": "s", "template": REPRODUCTION}])
    assert refused.status_code == 422, refused.text
    assert "step 's': template: line 1: loops over values written in the template" in (
        refused.json()["error"]["message"])
    assert await pool.fetchval("SELECT count(*) FROM jobs") == jobs_before
    job = await submit(api, items=[{"text": "x" * 20000}, {"text": "y" * 20000}],
                       steps=[{"name": "s", "template": OVER_DATA}])
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


async def test_checking_long_templates_never_holds_up_the_event_loop(api) -> None:  # noqa: F811
    # Twenty steps of templates as long as a step may have are over a second of parsing; the
    # request body limit (256 KiB) lets five through.
    long = "{{ item.a }}{% if item.b %}x{% endif %}" * 1280
    steps = [{"name": f"s{n}", "template": long} for n in range(5)]
    lags: list[float] = []

    async def watch() -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - before - 0.01)
    watcher = asyncio.create_task(watch())
    try:
        job = await submit(api, items=[{"a": 1}], steps=steps)
    finally:
        watcher.cancel()
    assert job.status_code == 201, job.text
    assert len(lags) > 10 and max(lags) < 0.1, max(lags)


async def test_a_template_nested_past_the_parser_is_refused_naming_it(api) -> None:  # noqa: F811
    deep = "{{ " + "(" * 2000 + "item.a" + ")" * 2000 + " }}"
    response = await submit(api, items=[{"a": 1}],
                            steps=[{"name": "s", "template": "ok"},
                                   {"name": "t", "template": deep}])
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["message"] == ("input.steps.1.template: step 't': template: expressions "
                                "nested too deeply")
    assert error["details"][0]["loc"] == ["body", "input", "steps", 1, "template"]
