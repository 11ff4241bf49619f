"""The Temporal Schedule that runs the retention sweep (workflows/retention.py).

Every worker makes sure it exists at start, with the settings it was given: the first creates
it, later ones update it to the same (or newer) settings, so it is never duplicated. It starts
even without `WAYSTATION_RETENTION_DAYS`, because erased runs must still be deleted after their
grace period; the sweep then deletes only those.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from waystation.settings import Settings
from waystation.workflows.retention import RetentionSweep
from waystation.workflows.retention_models import RetentionSweepInput

SCHEDULE_ID = "waystation-retention"
SWEEP_WORKFLOW_ID = "waystation-retention-sweep"


def retention_schedule(settings: Settings) -> Schedule:
    sweep = RetentionSweepInput(retention_days=settings.retention_days,
                                erasure_grace_hours=settings.erasure_grace_hours)
    return Schedule(
        action=ScheduleActionStartWorkflow(RetentionSweep.run, sweep, id=SWEEP_WORKFLOW_ID,
                                           task_queue=settings.temporal_task_queue),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(
            every=timedelta(minutes=settings.retention_interval_minutes))]),
        # A sweep still going when the next is due is left to finish; none piles up.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP))


async def ensure_retention_schedule(client: Client, settings: Settings) -> None:
    schedule = retention_schedule(settings)
    try:
        await client.create_schedule(SCHEDULE_ID, schedule)
    except ScheduleAlreadyRunningError:
        def replace(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)
        await client.get_schedule_handle(SCHEDULE_ID).update(replace)
