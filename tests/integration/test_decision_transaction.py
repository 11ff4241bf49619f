"""A decision's transaction in the recorder (issue 39): BEGIN, the gate's close, the vote, the
run's events and state, the enqueueing of its `gate.decided` webhooks, COMMIT. The close
answers the request as it closed it, so no statement reads the request again, and the webhook
tells what a read after the commit shows; a retried write, whose close finds the request
closed, reads it and enqueues nothing twice."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime

import asyncpg
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from tests.console_helpers import open_gate
from tests.helpers import new_validation_run
from waystation.activities.channels import WebhookChannel
from waystation.activities.read_model import ReadModelActivities
from waystation.persistence import webhooks as webhooks_repo
from waystation.persistence.db import create_pool
from waystation.persistence.gates import get_gate
from waystation.persistence.queries import sql
from waystation.persistence.sealing import SecretsBox
from waystation.persistence.writes import (
    EventWrite,
    GateCloseWrite,
    ReadModelWrite,
    RunStateWrite,
    VoteWrite,
)
from waystation.settings import DEV_SECRETS_KEY

NAMED = ("close_gate", "insert_vote", "apply_progress_write", "get_gate", "enqueue_deliveries")


def _statement(query: str) -> str:
    """A named query's name, else its first word (BEGIN, COMMIT)."""
    return next((name for name in NAMED if query == sql(name)), query.split()[0].rstrip(";"))


async def test_a_decisions_transaction_reads_no_request_back_and_its_webhook_tells_it(
        migrated_url: str, pool: asyncpg.Pool, dev_env: WorkflowEnvironment,
        task_queue: str) -> None:
    owner = f"decide-{uuid.uuid4().hex[:6]}"
    run_id = (await new_validation_run(pool, owner=owner)).run_id
    gate_id = await open_gate(pool, run_id)
    async with pool.acquire() as conn:
        await webhooks_repo.create_webhook(
            conn, webhook_id=uuid.uuid4(), owner=owner, group_id=None,
            url="https://hooks.example/decided",
            secret=SecretsBox(DEV_SECRETS_KEY).seal("whsec_" + "D" * 32),
            events=["gate.decided"], most=10)
    at = datetime.now(UTC)
    decision = ReadModelWrite(
        run_id=run_id,
        close_gate=GateCloseWrite(id=gate_id, status="approved", decision="approve",
                                  feedback="go", decision_by=owner, decision_at=at),
        votes=[VoteWrite(request_id=gate_id, voter=owner, on_behalf_of=owner, option="approve",
                         feedback="go", digest="d" * 64, voted_at=at)],
        events=[EventWrite(event_key="gate.review.decided", type="gate.decided", phase=1,
                           status="approved")],
        run=RunStateWrite(status="running", current_phase=2))

    statements: list[str] = []
    one = await create_pool(migrated_url, max_size=1)  # the recorder's one connection, logged
    try:
        async with one.acquire() as conn:
            conn.add_query_logger(lambda logged: statements.append(_statement(logged.query)))
        environment = ActivityEnvironment(client=dev_env.client)
        environment.info = dataclasses.replace(environment.info, task_queue=task_queue)
        recorder = ReadModelActivities(one, channels=[WebhookChannel(None)])
        first = await environment.run(recorder.record, decision)
        first_statements, statements[:] = list(statements), []
        again = await environment.run(recorder.record, decision)  # a retried activity
    finally:
        await one.close()

    assert first_statements == ["BEGIN", "close_gate", "insert_vote", "apply_progress_write",
                                "enqueue_deliveries", "COMMIT"]
    # The retry's close closes nothing, so it reads the request as the first try left it.
    assert statements == ["BEGIN", "close_gate", "insert_vote", "apply_progress_write",
                          "get_gate", "enqueue_deliveries", "COMMIT"]
    assert first.seqs == again.seqs == {"gate.review.decided": 1}

    async with pool.acquire() as conn:
        deliveries = await conn.fetch("SELECT event_key, payload FROM webhook_deliveries "
                                      "WHERE run_id = $1", run_id)
        gate = await get_gate(conn, gate_id)
    assert gate is not None
    [delivery] = deliveries
    assert delivery["event_key"] == f"gate.decided:{gate_id}"
    data = delivery["payload"]["data"]
    assert (data["status"], data["decision"], data["feedback"], data["decision_by"]) == (
        "approved", "approve", "go", owner)
    # Everything it tells is the request as read after the commit.
    committed = gate.model_dump(mode="json")
    assert data == {key: committed[key] for key in data if key != "request_id"} | {
        "request_id": str(gate_id)}

    handle = dev_env.client.get_workflow_handle(f"webhooks-{run_id}-{delivery['event_key']}")
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    await handle.terminate("no worker polls this test's queue")
