"""What Temporal answers, mapped once (api/services/workflow_updates.temporal_refusal), on the
real dev server: a workflow that no longer runs is the caller's own refusal, or nothing when
it was only to be stopped; Temporal unreachable is left for `as_api_error`'s 503."""

from __future__ import annotations

import uuid

import pytest
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from waystation.api.errors import ApiError, as_api_error
from waystation.api.services.workflow_updates import (
    cancel_workflow,
    execute_update,
    temporal_refusal,
)
from waystation.workflows.gate_handlers import GatedWorkflow

ENDED = ApiError(409, "run_finished", "the run is no longer running")


async def test_cancelling_a_workflow_that_is_gone_is_done_or_the_callers_refusal(
        dev_env: WorkflowEnvironment) -> None:
    gone = f"validation-{uuid.uuid4()}"
    # Erasure's loop: a workflow already gone is what was asked for.
    assert await cancel_workflow(dev_env.client, gone, ended=None) is None
    with pytest.raises(ApiError) as refused:
        await cancel_workflow(dev_env.client, gone, ended=ENDED)
    assert refused.value is ENDED


async def test_an_update_to_a_workflow_that_is_gone_is_the_callers_refusal(
        dev_env: WorkflowEnvironment) -> None:
    with pytest.raises(ApiError) as refused:
        await execute_update(dev_env.client, f"validation-{uuid.uuid4()}",
                             GatedWorkflow.decide, None, what="the decision", ended=ENDED)
    assert refused.value is ENDED


def test_temporal_unreachable_is_left_to_as_api_error_as_a_503() -> None:
    # What the client raises when no server answers (a stopped server, as
    # tests/faults/test_infra_faults.py shows end to end): not "gone", nobody answered.
    unreachable = RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")
    assert temporal_refusal(unreachable, what="the decision", ended=ENDED) is None
    mapped = as_api_error(unreachable)
    assert mapped is not None and (mapped.status, mapped.code) == (503, "unavailable")
