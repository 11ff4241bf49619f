"""The webhook deliveries of one event, each retried with backoff until delivered or given up
(see activities/webhooks.py for why they are started by the recorder, one workflow per event)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.webhooks import (
        NOTIFICATION_WORKFLOW,
        DeliveryInput,
        DeliveryResult,
        NotificationInput,
        NotificationResult,
        WebhookActivities,
    )

# 1 s, 2 s, 4 s ... then every 10 minutes, for up to 3 days (receivers go down for a
# weekend); each attempt gets the same webhook-id.
DELIVERY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                             maximum_interval=timedelta(minutes=10))
SEND_TIMEOUT = timedelta(seconds=30)
GIVE_UP_AFTER = timedelta(days=3)
LOCAL_TIMEOUT = timedelta(seconds=30)


@workflow.defn(name=NOTIFICATION_WORKFLOW, sandboxed=False)  # see waystation/sandboxing.py
class WebhookNotification:
    @workflow.run
    async def run(self, arg: NotificationInput) -> NotificationResult:
        pending = await workflow.execute_local_activity_method(
            WebhookActivities.pending, arg, start_to_close_timeout=LOCAL_TIMEOUT,
            summary="list deliveries")
        results = await asyncio.gather(*(self._deliver(d) for d in pending.delivery_ids))
        return NotificationResult(statuses={str(d): r.status
                                            for d, r in zip(pending.delivery_ids, results,
                                                            strict=True)})

    async def _deliver(self, delivery_id: UUID) -> DeliveryResult:
        arg = DeliveryInput(delivery_id=delivery_id)
        try:
            return await workflow.execute_activity_method(
                WebhookActivities.deliver, arg, start_to_close_timeout=SEND_TIMEOUT,
                schedule_to_close_timeout=GIVE_UP_AFTER, retry_policy=DELIVERY_RETRY,
                summary=f"send webhook msg_{delivery_id.hex}")
        except ActivityError:
            return await workflow.execute_local_activity_method(
                WebhookActivities.give_up, arg, start_to_close_timeout=LOCAL_TIMEOUT,
                summary="record delivery failed")
