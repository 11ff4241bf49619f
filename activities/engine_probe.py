"""The engine probe's step: an activity that does nothing, so that a chain of them measures
the server alone (workflows/engine_probe.py, `waystation doctor`, bench/bench_engine.py)."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import activity

ENGINE_PROBE_WORKFLOW = "WaystationEngineProbe"


class ProbeStep(BaseModel):
    index: int


@activity.defn(name="waystation_engine_probe_step")
async def probe_step(step: ProbeStep) -> ProbeStep:
    return step
