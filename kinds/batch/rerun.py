"""Running chosen items of a batch job again from a chosen step, as a new job whose items keep
their outputs of the steps before it: the one builder behind `POST /jobs/{id}/rerun`,
`/retry-failed` and the batch kind's fork (`POST /runs/{id}/fork`).

It reads the source job's items and outputs as they stand now: outputs live per item in
Postgres, not in the job's snapshots (which hold counts only).
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import asyncpg

from waystation.kinds.batch import repository as jobs_repo
from waystation.kinds.batch.models import MAX_INLINE_ITEMS, BatchInput, KeptOutput
from waystation.kinds.batch.repository import JobRow


class RerunRefused(Exception):
    """A re-run that cannot be built: `field` names what the caller asked for (`from_step`, or
    `item_ids` with the index of the first unknown id); `status` is the HTTP answer's."""

    def __init__(self, message: str, *, field: Sequence[str | int], code: str,
                 status: int = 422) -> None:
        super().__init__(message)
        self.message, self.field, self.code, self.status = message, list(field), code, status


def step_index(job: JobRow, step: str) -> int:
    """The step's index in the job's pipeline; refused naming `from_step` if it has none."""
    names = [s["name"] for s in job.spec["steps"]]
    if step not in names:
        raise RerunRefused(f"job {job.id} has no step {step!r}; its steps: {', '.join(names)}",
                           field=["from_step"], code="unknown_step")
    return names.index(step)


async def rerun_input(conn: asyncpg.Connection, job: JobRow, *, from_step: str | None,
                      item_ids: list[UUID] | None = None, status: str | None = None,
                      name: str) -> BatchInput:
    """The new job's input: the items of `job` with ids `item_ids` (None: all) and status
    `status` (None: any), in the job's order, running again from `from_step` (None: the first
    step) and keeping their outputs of the steps before it."""
    from_index = step_index(job, from_step) if from_step is not None else 0
    units = await jobs_repo.units_to_rerun(conn, job.id, ids=item_ids, status=status)
    if item_ids is not None:
        found = {u.id for u in units}
        unknown = [i for i, item_id in enumerate(item_ids) if item_id not in found]
        if unknown:
            names = ", ".join(str(item_ids[i]) for i in unknown[:5])
            raise RerunRefused(f"not items of job {job.id}: {names}",
                               field=["item_ids", unknown[0]], code="unknown_item")
    if len(units) > MAX_INLINE_ITEMS:
        # The new job takes its items inline, in its run's row.
        raise RerunRefused(f"{len(units)} items: a re-run takes at most {MAX_INLINE_ITEMS}; "
                           "choose them by item_ids", field=["item_ids"], code="too_many_items",
                           status=409)
    kept: dict[UUID, list[KeptOutput]] = {u.id: [] for u in units}
    if from_index > 0:
        for output in await jobs_repo.outputs_before(conn, list(kept), from_index):
            kept[output.unit_id].append(KeptOutput(
                step=output.step, output=output.output, rendered_prompt=output.rendered_prompt,
                next_step=output.next_step, flags=output.flags))
    return BatchInput.model_validate({
        **job.spec, "items_path": None, "items": [u.payload for u in units],
        "retry_of": job.id, "name": name[:200],
        "rerun_from": job.spec["steps"][from_index]["name"] if from_index else None,
        "kept_outputs": [kept[u.id] for u in units] if from_index else None,
        "description": job.description, "metadata": job.metadata})
