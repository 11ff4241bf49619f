"""A workflow module that imports the SDK at its top, outside `imports_passed_through()`, as a
plug-in's models module often does: Temporal's sandbox re-imports all of it for every run
(tests/unit/test_sdk_surface.py)."""

from __future__ import annotations

from temporalio import workflow

from waystation.sdk import DecisionInput, GateOption, GateSpec, RunKind, RunWorkflow
from waystation.sdk.gates import budget_gate_spec
from waystation.sdk.workflow import search_attributes

SURFACE = (GateOption, GateSpec, RunKind, RunWorkflow, budget_gate_spec, search_attributes)


@workflow.defn(name="SdkAtTopLevel", sandboxed=True)
class SdkAtTopLevel:
    @workflow.run
    async def run(self, decision: DecisionInput) -> str:
        return decision.option
