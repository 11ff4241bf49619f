"""Decision policies without servers: where a bad condition is wrong, what a condition sees,
how verdicts combine, and the analytics histogram's percentiles."""

from __future__ import annotations

import random
import uuid

import pytest

from waystation.activities.policy_rules import ConditionError, activation, compile_condition, judge
from waystation.contracts.decision_policies import (
    PolicyDecision,
    PolicyRequest,
    PolicyRun,
    PolicyVerdict,
    PolicyVerdicts,
)
from waystation.persistence.analytics import BUCKETS, bucket_bounds, percentiles

REFUND = PolicyRequest.of("approve_issue_refund_1", ["approve", "reject", "edit"], "approve",
                          {"tool": "issue_refund", "arguments": {"amount_eur": 25}})
RUN = PolicyRun(kind="agent", input={"message": "refund A-1, 25 EUR"}, owner="maya",
                cost_usd=0.25)


@pytest.mark.parametrize(("condition", "line", "column"), [
    ("request.tool.args.amount_eur <= ", 1, 33),
    ("request.tool.name == \"x\" &&\n  run.cost_usd <", 2, 17),
    ("amount < 3", 1, 1),
    ("run.cost_usd < 1 && nothing", 1, 21),
])
def test_a_bad_condition_names_its_line_and_column(condition: str, line: int, column: int):
    with pytest.raises(ConditionError) as refused:
        compile_condition(condition)
    assert (refused.value.line, refused.value.column) == (line, column)


def verdict(condition: str, decision: PolicyDecision | None = None) -> PolicyVerdict:
    return judge(policy_id=uuid.uuid4(), name="p", version=3, mode="decide",
                 condition=condition, decision=decision or PolicyDecision(decision="approve"),
                 seen=activation(REFUND, RUN))


def test_a_condition_sees_the_request_its_tool_and_the_run():
    held = verdict('request.tool.name == "issue_refund" && request.tool.args.amount_eur <= 50.0'
                   ' && run.input.message.contains("refund") && run.cost_usd < 1.0'
                   ' && request.recommended_option == "approve" && "edit" in request.options')
    assert (held.outcome, held.decided_by) == ("decide", "policy:p@3")
    assert verdict("request.tool.args.amount_eur > 50").outcome == "none"
    # A gate without a tool: `has` tells; reading it is an error, never a decision.
    plain = PolicyRequest.of("approve_brief", ["approve", "reject"], None, {"brief": "x"})
    seen = activation(plain, RUN)
    assert "tool" not in seen["request"]
    missing = judge(policy_id=uuid.uuid4(), name="p", version=1, mode="decide",
                    condition="request.tool.name == 'x'", seen=seen,
                    decision=PolicyDecision(decision="approve"))
    assert missing.outcome == "error" and missing.decision is None
    assert verdict("1").outcome == "error"  # not a bool


def acting(name: str, decision: PolicyDecision, mode: str = "decide") -> PolicyVerdict:
    return PolicyVerdict(policy_id=uuid.uuid4(), name=name, version=1, mode=mode,  # type: ignore[arg-type]
                         outcome=decision.outcome, decision=decision)


def test_verdicts_combine_routes_and_quorums_and_people_hold_a_decision_back():
    decide = acting("b", PolicyDecision(decision="approve"))
    shadow = acting("a", PolicyDecision(decision="reject"), mode="shadow")
    assert PolicyVerdicts(verdicts=[shadow, decide]).deciding() is decide
    held = PolicyVerdicts(verdicts=[decide, acting("c", PolicyDecision())])
    assert held.deciding() is None
    routed = PolicyVerdicts(verdicts=[
        acting("r1", PolicyDecision(route_to_roles=["finance"], quorum=2)),
        acting("r2", PolicyDecision(route_to_roles=["legal", "finance"],
                                    route_to_users=["lee"])),
        acting("q", PolicyDecision(quorum=3), mode="shadow")])
    assert routed.route_roles() == ["finance", "legal"]
    assert routed.route_users() == ["lee"]
    assert routed.quorum() == 2
    with pytest.raises(ValueError):
        PolicyDecision(decision="approve", quorum=2)


def test_histogram_percentiles_are_within_a_bucket_of_the_exact_ones():
    rng = random.Random(42)
    times = [2 ** rng.uniform(-2, 22) for _ in range(20_000)]
    histogram: dict[int, int] = {}
    for t in times:
        bucket = next(b for b in range(1, BUCKETS + 1)
                      if t < bucket_bounds(b)[1] or b == BUCKETS)
        histogram[bucket] = histogram.get(bucket, 0) + 1
    ordered = sorted(times)
    for q, estimate in zip((0.5, 0.9, 0.99), percentiles(histogram), strict=True):
        exact = ordered[int(q * len(ordered))]
        assert estimate is not None and exact / 2 ** 0.5 <= estimate <= exact * 2 ** 0.5
    assert percentiles({}) == [None, None, None]
