"""The `raise_budget` gate every run kind with `max_cost_usd` stops at.

A run checks, before its next model call (a task, a slice of items), whether that call would
pass its budget, priced from what calls cost so far; if so it asks a human to raise the budget
(the new amount in USD as feedback, validated before anything is written) or to stop.
"""

from __future__ import annotations

from datetime import timedelta

from waystation.contracts.statuses import ExpiryPolicy
from waystation.contracts.writes import GateOption
from waystation.workflows.gate_rules import GateSpec

RAISE_BUDGET = "raise_budget"
STOP_BUDGET = "budget"


def budget_gate_spec(*, phase: int, spent: float, next_call: float, budget: float,
                     expires_in: timedelta, expiry_policy: ExpiryPolicy) -> GateSpec:
    return GateSpec(
        checkpoint_name=RAISE_BUDGET, phase=phase, title=f"Budget of ${budget:g} reached",
        description=f"The run has spent ${spent:.4f}; its next model calls may cost about "
                    f"${next_call:.4f}, which would pass the budget of ${budget:g}. Raise the "
                    "budget (give the new amount in USD as feedback) or stop the run.",
        context={"spent_usd": spent, "next_call_usd": next_call, "max_cost_usd": budget},
        options=[GateOption(value="raise", label="Raise the budget",
                            description="Feedback: the new budget in USD."),
                 GateOption(value="stop", label="Stop the run")],
        recommended_option="stop", rejecting_options=["stop"],
        feedback_number_for=["raise"], feedback_number_above=spent + next_call,
        # Nobody raises a budget by default: an expired request pauses or fails the run.
        expires_in=expires_in,
        expiry_policy="pause" if expiry_policy == "default" else expiry_policy)


def stopped_message(budget: float, spent: float) -> str:
    return f"stopped at the budget of ${budget:g} (spent ${spent:.4f})"
