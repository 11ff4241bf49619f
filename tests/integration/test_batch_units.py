"""The item statements of a slice: an item's start carries the item before it's last step."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.batch_helpers import new_batch_run
from waystation.kinds.batch import repository as jobs_repo


def _worker(name: str) -> jobs_repo.WorkerStart:
    return jobs_repo.WorkerStart(worker_id=name, assigned_at=datetime.now(UTC))


def _last_step(unit_id, output: str) -> jobs_repo.StepOutputWrite:
    return jobs_repo.StepOutputWrite(
        unit_id=unit_id, step="w", step_index=0, output={"text": output, "fields": None},
        rendered_prompt="p", next_step=None, cost_usd=0.01, input_tokens=3, output_tokens=4,
        duration_ms=1, attempt=1, item_done=True, execution_ms=2)


async def test_starting_an_item_stores_the_previous_items_last_step_once(pool):
    arg = await new_batch_run(pool, items=[{"id": 0}, {"id": 1}],
                              steps=[{"name": "w", "template": "{{ item.id }}"}])
    async with pool.acquire() as conn:
        await jobs_repo.insert_job(conn, arg.run_id, name="j", spec=arg.spec.model_dump(
            mode="json"), max_workers=1)
        await jobs_repo.insert_units(conn, arg.run_id, 0, [{"id": 0}, {"id": 1}])
        first = await jobs_repo.start_unit(conn, arg.run_id, 0, 0, run_retrying=False,
                                           worker=_worker("1@a"))
        assert first is not None and first.previous_status == "pending"
        before = datetime.now(UTC)
        second = await jobs_repo.start_unit(conn, arg.run_id, 1, 0, run_retrying=False,
                                            worker=_worker("1@a"),
                                            finishing=_last_step(first.id, "done"))
        assert second is not None and (second.status, second.previous_status) == (
            "running", "pending") and second.outputs == {}
        # The same statement again (a retried slice): the step counts a second execution,
        # its cost is not added twice, and the started item reads as running already.
        again = await jobs_repo.start_unit(conn, arg.run_id, 1, 0, run_retrying=False,
                                           worker=_worker("2@b"),
                                           finishing=_last_step(first.id, "done"))
        # A finished item keeps the worker that ran it; starting it again changes nothing.
        await jobs_repo.start_unit(conn, arg.run_id, 0, 0, run_retrying=False,
                                   worker=_worker("3@c"))
        assert again is not None and again.previous_status == "running"
        done = await conn.fetchrow("SELECT * FROM work_units WHERE id = $1", first.id)
        output = await jobs_repo.get_output(conn, first.id, "w")
    assert (done["status"], done["path"], done["result"]) == (
        "completed", ["w"], {"text": "done", "fields": None})
    assert float(done["cost_usd"]) == 0.01 and done["completed_at"] >= before
    assert output is not None and output.executions == 2
    assert done["worker_id"] == "1@a" and done["assigned_at"] <= done["started_at"]
