"""The activity that judges a gate by the decision policies that apply to it, as it opens.

Workflow code never reads a policy table: it calls this activity, and its result (which
policies, at which versions, came to what) is in the run's history, so a replay acts the same
whatever the policies have become since. The verdicts are also written beside the request
(`policy_evaluations`): a shadow policy's agreement with people is read from there.
"""

from __future__ import annotations

import asyncpg
from temporalio import activity

from waystation.activities.policy_rules import activation, judge
from waystation.contracts.decision_policies import EvaluatePoliciesInput, PolicyVerdicts
from waystation.persistence import policies as policies_repo


class DecisionPolicyActivities:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @activity.defn(name="evaluate_decision_policies")
    async def evaluate(self, request: EvaluatePoliciesInput) -> PolicyVerdicts:
        async with self._pool.acquire() as conn:
            run = await policies_repo.policy_run(conn, request.run_id)
            if run is None:
                return PolicyVerdicts()
            policies = await policies_repo.applicable(conn, run, request.request.checkpoint)
            if not policies:
                return PolicyVerdicts()
            seen = activation(request.request, run)
            verdicts = [judge(policy_id=p.id, name=p.name, version=p.version, mode=p.mode,
                              condition=p.condition, decision=p.decision, seen=seen)
                        for p in policies]
            await policies_repo.record_verdicts(conn, run_id=request.run_id,
                                                request_id=request.request_id,
                                                verdicts=verdicts)
        return PolicyVerdicts(verdicts=verdicts)
