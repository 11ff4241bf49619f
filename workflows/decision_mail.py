"""Email a request's deciders, retried with backoff (see activities/decision_mail.py)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.decision_mail import (
        DECISION_MAIL_WORKFLOW,
        DecisionMailActivities,
        DecisionMailInput,
        DecisionMailResult,
    )
    from workflows.webhook_notification import DELIVERY_RETRY

SEND_TIMEOUT = timedelta(minutes=2)
# A mail that cannot go out within a day is no longer worth sending: the inbox and webhooks
# still tell of the request.
GIVE_UP_AFTER = timedelta(days=1)


@workflow.defn(name=DECISION_MAIL_WORKFLOW, sandboxed=False)  # see waystation/sandboxing.py
class DecisionMail:
    @workflow.run
    async def run(self, arg: DecisionMailInput) -> DecisionMailResult:
        return await workflow.execute_activity_method(
            DecisionMailActivities.send, arg, start_to_close_timeout=SEND_TIMEOUT,
            schedule_to_close_timeout=GIVE_UP_AFTER, retry_policy=DELIVERY_RETRY,
            summary="email the deciders")
