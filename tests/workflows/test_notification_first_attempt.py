"""A decision mail's first attempt is a local activity in the workflow's first task; when it
fails, the retries are regular activities with the backoff (time-skipping server).

The webhook path is covered end to end by tests/integration/test_webhooks.py (a receiver
failing twice: attempts 1, 2, 3 in the delivery log, one webhook-id)."""

from __future__ import annotations

import uuid

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from waystation.activities.decision_mail import (
    DECISION_MAIL_WORKFLOW,
    DecisionMailInput,
    DecisionMailResult,
)
from waystation.workflows.decision_mail import FIRST_ATTEMPT_LOCAL_PATCH, DecisionMail


class FlakySmtp:
    """`send_decision_mail` as a mail server that refuses the first `failures` attempts."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[tuple[bool, int]] = []  # (local, attempt) of each call

    @activity.defn(name="send_decision_mail")
    async def send(self, arg: DecisionMailInput) -> DecisionMailResult:
        info = activity.info()
        self.calls.append((info.is_local, info.attempt))
        if len(self.calls) <= self.failures:
            raise ConnectionRefusedError("SMTP server down")
        return DecisionMailResult(sent=2)


async def run_mail(env: WorkflowEnvironment, smtp: FlakySmtp) -> tuple[DecisionMailResult, list]:
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(env.client, task_queue=queue, workflows=[DecisionMail],
                      activities=[smtp.send]):
        handle = await env.client.start_workflow(
            DECISION_MAIL_WORKFLOW, DecisionMailInput(request_id=uuid.uuid4()),
            id=f"mail-{uuid.uuid4()}", task_queue=queue, result_type=DecisionMailResult)
        result = await handle.result()
        history = await handle.fetch_history()
    return result, list(history.events)


async def test_a_mail_that_goes_out_at_once_takes_no_regular_activity(time_env):
    smtp = FlakySmtp(failures=0)
    result, events = await run_mail(time_env, smtp)
    assert result.sent == 2
    assert smtp.calls == [(True, 1)]
    types = [e.event_type for e in events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in types
    # Started, its one workflow task (the patch marker and the local activity's), completed.
    assert types.count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) == 1
    markers = [e.marker_recorded_event_attributes for e in events
               if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    assert [m.marker_name for m in markers] == ["core_patch", "core_local_activity"]
    assert FIRST_ATTEMPT_LOCAL_PATCH.encode() in markers[0].details["patch-data"].payloads[0].data


async def test_a_failed_first_attempt_is_retried_by_regular_activities(time_env):
    smtp = FlakySmtp(failures=3)
    result, events = await run_mail(time_env, smtp)
    assert result.sent == 2
    # The local attempt, then the regular activity's attempts 1 and 2 failing, 3 sending.
    assert smtp.calls == [(True, 1), (False, 1), (False, 2), (False, 3)]
    types = [e.event_type for e in events]
    assert types.count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == 1
    assert types.count(EventType.EVENT_TYPE_TIMER_STARTED) == 1  # the backoff's first second
