"""Two later versions of ValidationRun under the same workflow type, for `waystation replay`.

Both start with a timer the released code never issued. `TimerFirst` adds it bare, which breaks
every run started by the released code; `PatchedTimerFirst` guards it with `workflow.patched`,
which keeps old histories on the old path and so replays them.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from waystation.kinds.validation.models import ValidationRunInput, ValidationRunResult
from waystation.kinds.validation.workflow import ValidationRun

PAUSE = timedelta(seconds=1)


@workflow.defn(name="ValidationRun")
class TimerFirst(ValidationRun):
    @workflow.run
    async def run(self, arg: ValidationRunInput) -> ValidationRunResult:
        await workflow.sleep(PAUSE)
        return await super().run(arg)


@workflow.defn(name="ValidationRun")
class PatchedTimerFirst(ValidationRun):
    @workflow.run
    async def run(self, arg: ValidationRunInput) -> ValidationRunResult:
        if workflow.patched("pause-before-start"):
            await workflow.sleep(PAUSE)
        return await super().run(arg)
