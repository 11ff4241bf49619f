"""A batch job's spend against its budget, and the gate that asks to raise it.

A part of `BatchJob` (kinds/batch/host.py). Slices and items report the job's spend so far
(when it has a budget); before starting more work the job asks whether it would go past the
budget at the average cost so far, and if so a person raises the budget or the job stops
(`STOP_BUDGET`).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.batch.host import BatchHost
    from waystation.sdk.gates import (
        RAISE_BUDGET,
        STOP_BUDGET,
        budget_gate_spec,
        feedback_number,
        stopped_message,
    )


class Budget:
    """The job's spend and its budget (both in `BatchProgress`: carried across rounds)."""

    def __init__(self, host: BatchHost) -> None:
        self._host = host

    @property
    def counted(self) -> bool:
        """Whether the job has a budget, so its activities report what they spend."""
        return self._host.counts.max_cost_usd is not None

    def spent(self, job_cost_usd: float | None) -> None:
        # Slices finish in any order: the largest total reported is the latest.
        if job_cost_usd is not None:
            self._host.counts.cost_usd = max(self._host.counts.cost_usd, job_cost_usd)

    def over(self, items: int) -> bool:
        """Whether `items` more items may take the job past its budget."""
        p = self._host.counts
        return p.max_cost_usd is not None and p.cost_usd + self._next_cost(items) > p.max_cost_usd

    async def ask(self, items: int) -> None:
        """The budget gate: raised, the job goes on; refused or expired, it stops."""
        host = self._host
        p, spec = host.counts, host.spec
        budget = p.max_cost_usd
        assert budget is not None
        outcome = await host.ask_human(
            lambda: budget_gate_spec(
                phase=0, spent=p.cost_usd, next_call=self._next_cost(items), budget=budget,
                expires_in=timedelta(seconds=spec.gate_timeout_seconds), expiry_policy="pause"),
            where="budget", decided=host.take_decided(RAISE_BUDGET))
        d = outcome.decision
        if d is not None and d.decision == "raise":
            p.max_cost_usd = feedback_number(d.feedback)
        elif host.stop is None:
            host.stop = (STOP_BUDGET, stopped_message(budget, p.cost_usd))

    def _next_cost(self, items: int) -> float:
        """What `items` more items may cost, at the average so far."""
        p = self._host.counts
        done = p.completed + p.failed
        return p.cost_usd / done * items if done else 0.0
