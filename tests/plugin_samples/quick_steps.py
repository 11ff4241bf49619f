"""A plug-in kind whose steps are recorder writes, with one gate whose decision travels with
the next write (`ask_human(..., record_with_next=True)`):
tests/workflows/test_decision_with_next_write.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.sdk import GateOption, GateSpec, RunKind, RunWorkflow

GATE = "carry_on"


class QuickInput(BaseModel):
    steps: int = Field(3, ge=1, le=10)
    # Ask after this step; equal to `steps`, the run completes right after the decision.
    gate_after: int = Field(1, ge=1, le=10)
    # End with `fail(...)` instead of `complete(...)`.
    fail_at_end: bool = False


class QuickRunInput(BaseModel):
    run_id: UUID
    owner: str
    input: QuickInput


class QuickResult(BaseModel):
    decision: str | None


@workflow.defn(name="QuickSteps")
class QuickSteps(RunWorkflow):
    @workflow.init
    def __init__(self, arg: QuickRunInput) -> None:
        self._arg = arg
        self._step = 0
        self.init_run(arg.run_id)

    @workflow.run
    async def run(self, arg: QuickRunInput) -> QuickResult:
        return await self.lifecycle(self._steps)

    async def _steps(self) -> QuickResult:
        self.stage_start()
        decision = None
        for step in range(1, self._arg.input.steps + 1):
            self._step = step
            await self.record(events=[self.event(f"step.{step}", "step.completed",
                                                 phase=step, status="completed")],
                              snapshot=f"step {step}", with_state=True)
            if step == self._arg.input.gate_after:
                outcome = await self.ask_human(self._gate, where=f"step {step}",
                                               record_with_next=True)
                decision = outcome.decision.decision if outcome.decision else None
        if self._arg.input.fail_at_end:
            await self.fail(f"told to fail after {decision}", stop_reason="told_to_fail")
        result = QuickResult(decision=decision)
        await self.complete(result)
        return result

    def _gate(self) -> GateSpec:
        return GateSpec(checkpoint_name=GATE, phase=self._step, title="Carry on?",
                        description="Decided with the next step's write.",
                        options=[GateOption(value="approve", label="Approve"),
                                 GateOption(value="reject", label="Reject")],
                        rejecting_options=["reject"], expires_in=timedelta(hours=1))

    def position(self) -> tuple[int, str | None]:
        return self._step, f"step {self._step}"

    def kind_state(self) -> dict[str, Any]:
        return {"step": self._step}


QUICK_STEPS = RunKind(name="quick_steps", workflow=QuickSteps, input_model=QuickInput,
                      workflow_id_prefix="quick-steps-", summary=lambda run: "quick steps",
                      # A write held up for longer than 1.6 s lets the workflow see a cancel.
                      task_timeout=timedelta(seconds=2))
RUN_KINDS = [QUICK_STEPS]
