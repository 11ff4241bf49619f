"""The peers benchmark's toy as a Waystation run kind: five phases, each one no-op step that
writes a progress event and a state snapshot, and optionally one human approval.

It is a plug-in kind like any team's (`RunKind` + `RunWorkflow`), so the benchmark measures
Waystation's own run machinery: the lifecycle, the recorder, the gate. Like the built-in
kinds, and as a team may declare its own, it runs outside Temporal's sandbox.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.sdk import GateOption, GateSpec, RunKind, RunWorkflow

PHASES = 5
GATE = "approve_toy"


class ToyInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Ask a human after this phase; None runs straight through.
    approve_after: int | None = Field(None, ge=1, le=PHASES - 1)


class ToyRunInput(BaseModel):
    run_id: UUID
    owner: str
    input: ToyInput


class ToyResult(BaseModel):
    phases: int


@workflow.defn(name="PeerToy", sandboxed=False)  # see waystation/sandboxing.py
class PeerToy(RunWorkflow):
    @workflow.init
    def __init__(self, arg: ToyRunInput) -> None:
        self._arg = arg
        self._phase = 0
        self.init_run(arg.run_id)

    @workflow.run
    async def run(self, arg: ToyRunInput) -> ToyResult:
        return await self.lifecycle(self._phases)

    async def _phases(self) -> ToyResult:
        self.stage_start()
        for phase in range(1, PHASES + 1):
            self._phase = phase
            # The step: one progress event and a snapshot, written as one local activity.
            await self.record(events=[self.event(f"step.{phase}", "step.completed",
                                                 phase=phase, status="completed")],
                              snapshot=f"phase {phase}", with_state=True)
            if phase == self._arg.input.approve_after:
                # The next step is a recorder write: the decision goes out with it.
                await self.ask_human(self._gate, where=f"phase {phase}", record_with_next=True)
        result = ToyResult(phases=PHASES)
        await self.complete(result)
        return result

    def _gate(self) -> GateSpec:
        return GateSpec(checkpoint_name=GATE, phase=self._phase, title="Carry on?",
                        description="The toy's one approval.",
                        options=[GateOption(value="approve", label="Approve")],
                        expires_in=timedelta(hours=1))

    def position(self) -> tuple[int, str | None]:
        return self._phase, f"phase {self._phase}"

    def kind_state(self) -> dict[str, Any]:
        return {"phase": self._phase}


PEER_TOY = RunKind(name="peer_toy", workflow=PeerToy, input_model=ToyInput,
                   workflow_id_prefix="peer-toy-", summary=lambda run: "peer benchmark toy")
RUN_KINDS = [PEER_TOY]
