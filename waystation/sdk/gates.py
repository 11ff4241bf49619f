"""Gates beyond `GateSpec` and `DecisionInput`: an open gate as a workflow sees it, the number
in a decision's feedback, the budget gate a run asks before spending past its budget, and the
roles that may decide a gate by default.
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.contracts.writes import DEFAULT_DECIDER_ROLES, GATE_PARTS
    from waystation.workflows.budget import (
        RAISE_BUDGET,
        STOP_BUDGET,
        budget_gate_spec,
        stopped_message,
    )
    from waystation.workflows.gate_rules import OpenGate, feedback_number

__all__ = [
    "DEFAULT_DECIDER_ROLES", "GATE_PARTS", "RAISE_BUDGET", "STOP_BUDGET", "OpenGate",
    "budget_gate_spec", "feedback_number", "stopped_message",
]
