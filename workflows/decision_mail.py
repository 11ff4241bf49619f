"""Email a request's deciders, retried with backoff (see activities/decision_mail.py).

The first attempt is a local activity, as a webhook's is (workflows/webhook_notification.py):
the mail leaves in the workflow's first task; the retries are regular activities."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.activities.decision_mail import (
        DECISION_MAIL_WORKFLOW,
        DecisionMailActivities,
        DecisionMailInput,
        DecisionMailResult,
    )
    from waystation.workflows.webhook_notification import (
        DELIVERY_RETRY,
        FIRST_ATTEMPT_FAILED,
        first_attempt,
    )

# Runs started before the first attempt was a local activity replay so.
FIRST_ATTEMPT_LOCAL_PATCH = "decision-mail-first-attempt-local"

SEND_TIMEOUT = timedelta(minutes=2)
# A mail that cannot go out within a day is no longer worth sending: the inbox and webhooks
# still tell of the request.
GIVE_UP_AFTER = timedelta(days=1)


@workflow.defn(name=DECISION_MAIL_WORKFLOW, sandboxed=False)  # see waystation/sandboxing.py
class DecisionMail:
    @workflow.run
    async def run(self, arg: DecisionMailInput) -> DecisionMailResult:
        if workflow.patched(FIRST_ATTEMPT_LOCAL_PATCH):
            try:
                return await first_attempt(DecisionMailActivities.send, arg,
                                           start_to_close=SEND_TIMEOUT,
                                           summary="email the deciders")
            except FIRST_ATTEMPT_FAILED:
                await workflow.sleep(DELIVERY_RETRY.initial_interval)
        return await workflow.execute_activity_method(
            DecisionMailActivities.send, arg, start_to_close_timeout=SEND_TIMEOUT,
            schedule_to_close_timeout=GIVE_UP_AFTER, retry_policy=DELIVERY_RETRY,
            summary="email the deciders")
