"""Repository functions for batch jobs: `jobs`, `work_units` and `item_outputs`."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from importlib import resources
from typing import Any
from uuid import UUID

import asyncpg
from pydantic import BaseModel, Field

from waystation.kinds.batch.output_flags import OutputFlag
from waystation.sdk.reads import Row, Usd, queries_in

# Items go in this many per statement: one round trip each, small enough to stay fast.
INSERT_CHUNK = 2000

# The kind's own named queries (queries/*.sql beside this module).
sql = queries_in(resources.files(__package__) / "queries")


class JobRow(Row):
    id: UUID
    run_id: UUID
    name: str
    status: str
    spec: dict[str, Any]
    total_units: int
    max_workers: int
    test_unit_id: UUID | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    owner: str
    error_message: str | None
    # Migration 062: given at start, and whether the test item passed (NULL until known).
    description: str | None = None
    test_passed: bool | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class UnitRow(Row):
    id: UUID
    job_id: UUID
    ordinal: int
    status: str
    payload: Any
    result: Any
    error: str | None
    retry_count: int
    path: list[str]
    rendered_prompt: str | None
    conversation: list[Any]
    cost_usd: Usd
    input_tokens: int
    output_tokens: int
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    execution_ms: int | None
    # The step the item stands at now (read with it: list_units, get_unit).
    at_step: str | None = None
    # Every output check's flag on its outputs (migration 084).
    flags: list[OutputFlag] = Field(default_factory=list)
    # Migration 061: the worker that last started it and when, the files its steps reported,
    # the provider's id of its last answer.
    worker_id: str | None = None
    assigned_at: datetime | None = None
    output_files: list[str] = Field(default_factory=list)
    session_id: str | None = None


class OutputRow(Row):
    unit_id: UUID
    step: str
    step_index: int
    output: Any
    rendered_prompt: str
    next_step: str | None
    cost_usd: Usd
    input_tokens: int
    output_tokens: int
    duration_ms: int | None
    executions: int
    created_at: datetime
    flags: list[OutputFlag] = Field(default_factory=list)


class StepOutputRow(OutputRow):
    ordinal: int


class StatusCount(BaseModel):
    status: str
    count: int
    cost_usd: Usd
    input_tokens: int
    output_tokens: int


class StartedUnit(BaseModel):
    id: UUID
    status: str
    previous_status: str
    payload: Any
    error: str | None
    started_at: datetime
    outputs: dict[str, Any]


class StepOutputWrite(BaseModel):
    unit_id: UUID
    step: str
    step_index: int
    output: Any
    rendered_prompt: str
    next_step: str | None
    cost_usd: Usd
    input_tokens: int
    output_tokens: int
    duration_ms: int
    attempt: int
    item_done: bool
    execution_ms: int
    flags: list[OutputFlag] = Field(default_factory=list)
    output_files: list[str] = Field(default_factory=list)
    session_id: str | None = None


class WorkerStart(BaseModel):
    """Who starts an item and when its slice (or single-item activity) began."""

    worker_id: str
    assigned_at: datetime


# --- writes (activities) ----------------------------------------------------------------------

async def insert_job(conn: asyncpg.Connection, job_id: UUID, *, name: str,
                     spec: dict[str, Any], max_workers: int) -> None:
    await conn.execute(sql("insert_job"), job_id, name, spec, max_workers)


async def run_items(conn: asyncpg.Connection, run_id: UUID) -> list[Any]:
    return await conn.fetchval(sql("run_items"), run_id) or []


async def insert_units(conn: asyncpg.Connection, job_id: UUID, first_ordinal: int,
                       payloads: list[Any]) -> None:
    await conn.execute(sql("insert_work_units"), job_id, first_ordinal, payloads)


async def keep_earlier_outputs(conn: asyncpg.Connection, job_id: UUID,
                               steps: list[str]) -> None:
    await conn.execute(sql("keep_earlier_outputs"), job_id, steps)


async def set_total(conn: asyncpg.Connection, job_id: UUID, total: int, test_first: bool) -> None:
    await conn.execute(sql("set_job_total"), job_id, total, test_first)


async def job_total(conn: asyncpg.Connection, job_id: UUID) -> int:
    return await conn.fetchval(sql("job_total"), job_id) or 0


async def job_spec(conn: asyncpg.Connection, job_id: UUID) -> dict[str, Any] | None:
    return await conn.fetchval(sql("job_spec"), job_id)


async def start_unit(conn: asyncpg.Connection, job_id: UUID, ordinal: int, retries: int, *,
                     run_retrying: bool, worker: WorkerStart,
                     finishing: StepOutputWrite | None = None) -> StartedUnit | None:
    """Mark an item running on `worker` and read it; `finishing`, the last step of the item
    before, is stored by the same statement (one round trip and one commit for both)."""
    record = await conn.fetchrow(sql("record_step_and_start_unit"), *_step_args(finishing),
                                 job_id, ordinal, retries, run_retrying,
                                 *_step_extras(finishing), worker.worker_id, worker.assigned_at)
    return StartedUnit.model_validate(dict(record)) if record else None


async def record_step_output(conn: asyncpg.Connection, w: StepOutputWrite) -> None:
    await conn.execute(sql("record_step_and_start_unit"), *_step_args(w), None, None, None,
                       None, *_step_extras(w), None, None)


def _step_args(w: StepOutputWrite | None) -> tuple[Any, ...]:
    if w is None:
        return (None,) * 14
    turn = {"step": w.step, "prompt": w.rendered_prompt, "output": w.output}
    if w.session_id is not None:
        turn["session_id"] = w.session_id
    return (w.unit_id, w.step, w.step_index, w.output, w.rendered_prompt, w.next_step,
            Decimal(str(w.cost_usd)), w.input_tokens, w.output_tokens, w.duration_ms, [turn],
            w.attempt - 1, w.execution_ms, w.item_done)


def _step_extras(w: StepOutputWrite | None) -> tuple[Any, ...]:
    """The step's flags, files and session id ($19-$21)."""
    if w is None:
        return None, None, None
    return [f.model_dump() for f in w.flags], w.output_files, w.session_id


async def finish_unit(conn: asyncpg.Connection, unit_id: UUID) -> None:
    await conn.execute(sql("finish_unit_on_stored_path"), unit_id)


async def fail_unit(conn: asyncpg.Connection, unit_id: UUID, *, final: bool, error: str,
                    retries: int, cost_usd: float = 0.0, input_tokens: int = 0,
                    output_tokens: int = 0, step: str | None = None,
                    prompt: str | None = None) -> None:
    """Record a failed attempt; `step` and `prompt`, the step it failed at and the prompt
    sent, become the item's last turn (with the error) and its rendered prompt."""
    turns = [] if step is None else [{"step": step, "prompt": prompt, "error": error,
                                      "attempt": retries + 1}]
    await conn.execute(sql("fail_unit"), unit_id, "failed" if final else "retrying", error,
                       retries, Decimal(str(cost_usd)), input_tokens, output_tokens, prompt,
                       turns)


async def job_cost(conn: asyncpg.Connection, job_id: UUID) -> float:
    return float(await conn.fetchval(sql("job_cost"), job_id))


# --- reads (API) -------------------------------------------------------------------------------

async def get_job(conn: asyncpg.Connection, job_id: UUID) -> JobRow | None:
    record = await conn.fetchrow(sql("get_job"), job_id)
    return JobRow.from_record(record) if record else None


async def unit_counts(conn: asyncpg.Connection, job_id: UUID) -> list[StatusCount]:
    return [StatusCount(status=r["status"], count=r["n"], cost_usd=float(r["cost_usd"]),
                        input_tokens=r["input_tokens"], output_tokens=r["output_tokens"])
            for r in await conn.fetch(sql("job_unit_counts"), job_id)]


async def list_units(conn: asyncpg.Connection, job_id: UUID, *, status: str | None,
                     after_ordinal: int, limit: int, at_step: str | None = None,
                     flagged: bool | None = None) -> list[UnitRow]:
    records = await conn.fetch(sql("list_units"), job_id, status, after_ordinal, limit, at_step,
                               flagged)
    return [UnitRow.from_record(r) for r in records]


async def list_step_outputs(conn: asyncpg.Connection, job_id: UUID, step: str, *,
                            after_ordinal: int, limit: int) -> list[StepOutputRow]:
    records = await conn.fetch(sql("list_step_outputs"), job_id, step, after_ordinal, limit)
    return [StepOutputRow.from_record(r) for r in records]


async def get_unit(conn: asyncpg.Connection, unit_id: UUID) -> tuple[UnitRow, UUID] | None:
    record = await conn.fetchrow(sql("get_unit"), unit_id)
    if record is None:
        return None
    values = dict(record)
    run_id = values.pop("run_id")
    return UnitRow.model_validate(values), run_id


async def list_outputs(conn: asyncpg.Connection, unit_id: UUID) -> list[OutputRow]:
    return [OutputRow.from_record(r) for r in await conn.fetch(sql("list_unit_outputs"), unit_id)]


async def get_output(conn: asyncpg.Connection, unit_id: UUID, step: str) -> OutputRow | None:
    record = await conn.fetchrow(sql("get_unit_output"), unit_id, step)
    return OutputRow.from_record(record) if record else None


async def units_to_rerun(conn: asyncpg.Connection, job_id: UUID, *,
                         ids: list[UUID] | None = None,
                         status: str | None = None) -> list[UnitRow]:
    records = await conn.fetch(sql("units_to_rerun"), job_id, ids, status)
    return [UnitRow.from_record(r) for r in records]


async def outputs_before(conn: asyncpg.Connection, unit_ids: list[UUID],
                         step_index: int) -> list[OutputRow]:
    records = await conn.fetch(sql("outputs_before_step"), unit_ids, step_index)
    return [OutputRow.from_record(r) for r in records]


async def item_counts(conn: asyncpg.Connection) -> list[tuple[str, int]]:
    """(status, items) over every job: the `waystation_batch_items` gauge."""
    return [(r["status"], r["items"]) for r in await conn.fetch(sql("metrics_batch_items"))]


async def archive_sections(conn: asyncpg.Connection,
                           run_ids: list[UUID]) -> dict[UUID, dict[str, Any]]:
    """Per run with a job: its `job`, `work_units` and `item_outputs`, as archived."""
    return {r["run_id"]: json.loads(r["sections"])
            for r in await conn.fetch(sql("archive_batch_jobs"), run_ids)}


async def delete_item_outputs(conn: asyncpg.Connection, run_ids: list[UUID],
                              limit: int) -> int:
    """Delete at most `limit` item outputs of the runs' jobs; returns how many it deleted."""
    status = await conn.execute(sql("delete_item_outputs_chunk"), run_ids, limit)
    return int(status.split()[-1])
