"""Bring a run's Slack messages up to date, retried with backoff until Slack takes it (see
activities/slack/channel.py). Started only when the recorder's own attempt did not finish (Slack
down, slow or rate limiting), so its first attempt waits a moment before trying again; a 429's
Retry-After sets the delay of the retry that follows it."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from waystation.activities.slack.channel import (
        SLACK_WORKFLOW,
        SlackActivities,
        SlackSyncInput,
        SlackSyncResult,
    )
    from waystation.workflows.webhook_notification import DELIVERY_RETRY

SEND_TIMEOUT = timedelta(minutes=1)
# A gate's message that cannot be brought up to date within a day is left: the console, the
# API and the other channels still tell of the request, and the next change of any of the
# run's requests tries again.
GIVE_UP_AFTER = timedelta(days=1)


@workflow.defn(name=SLACK_WORKFLOW, sandboxed=False)  # see waystation/sandboxing.py
class SlackNotification:
    @workflow.run
    async def run(self, arg: SlackSyncInput) -> SlackSyncResult:
        await workflow.sleep(DELIVERY_RETRY.initial_interval)
        try:
            return await workflow.execute_activity_method(
                SlackActivities.sync, arg, start_to_close_timeout=SEND_TIMEOUT,
                schedule_to_close_timeout=GIVE_UP_AFTER, retry_policy=DELIVERY_RETRY,
                summary="update the Slack messages")
        except ActivityError:
            workflow.logger.warning("Slack messages of run %s left out of date", arg.run_id)
            return SlackSyncResult()
