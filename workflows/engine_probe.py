"""A chain of empty activities, one after another: between two of them the server only
hands out a workflow task, so the chain's history shows how long it keeps one waiting
(waystation/engine_check.py). Then, if asked, a few timers as short as a decision's answer
break, one after another: their history shows how late the cluster fires a short timer.
Run on a task queue of its own by whoever measures, never by the project's workers: no run of
it outlives the check that started it."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.activities.engine_probe import ENGINE_PROBE_WORKFLOW, ProbeStep, probe_step
    from waystation.workflows.gate_handlers import ANSWER_BREAK

STEP_TIMEOUT = timedelta(seconds=30)


class ProbeChain(BaseModel):
    activities: int = Field(ge=1, le=1000)
    # Timers of ANSWER_BREAK after the chain, one after another.
    timers: int = Field(0, ge=0, le=100)


@workflow.defn(name=ENGINE_PROBE_WORKFLOW, sandboxed=False)  # see waystation/sandboxing.py
class EngineProbe:
    @workflow.run
    async def run(self, chain: ProbeChain) -> ProbeChain:
        for index in range(chain.activities):
            await workflow.execute_activity(probe_step, ProbeStep(index=index),
                                            start_to_close_timeout=STEP_TIMEOUT)
        for _ in range(chain.timers):
            await workflow.sleep(ANSWER_BREAK)
        return chain
