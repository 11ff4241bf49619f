"""One webhook delivery, retried with backoff until delivered or given up (see
activities/webhooks.py for why deliveries are workflows started by the recorder)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.webhooks import (
        DELIVERY_WORKFLOW,
        DeliveryInput,
        DeliveryResult,
        WebhookActivities,
    )

# 1 s, 2 s, 4 s ... then every 10 minutes, for up to 3 days (receivers go down for a
# weekend); each attempt gets the same webhook-id.
DELIVERY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                             maximum_interval=timedelta(minutes=10))
SEND_TIMEOUT = timedelta(seconds=30)
GIVE_UP_AFTER = timedelta(days=3)


@workflow.defn(name=DELIVERY_WORKFLOW)
class WebhookDelivery:
    @workflow.run
    async def run(self, arg: DeliveryInput) -> DeliveryResult:
        try:
            return await workflow.execute_activity_method(
                WebhookActivities.deliver, arg, start_to_close_timeout=SEND_TIMEOUT,
                schedule_to_close_timeout=GIVE_UP_AFTER, retry_policy=DELIVERY_RETRY,
                summary="send signed webhook")
        except ActivityError:
            return await workflow.execute_local_activity_method(
                WebhookActivities.give_up, arg, start_to_close_timeout=timedelta(seconds=30),
                summary="record delivery failed")
