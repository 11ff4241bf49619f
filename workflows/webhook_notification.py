"""The webhook deliveries of one event, each retried with backoff until delivered or given up
(see activities/webhooks.py for why they are started by the recorder, one workflow per event).

The first attempt of each delivery is a local activity, in the workflow's first task: a
regular activity costs a server round trip (about 50 ms on the dev server) before the POST
leaves, which is most of the time from a gate opening to its webhook arriving (issue 31).
Only when that attempt fails do the retries, with their backoff over days, go to regular
activities; every attempt carries the same webhook-id and the delivery log numbers them on.
Before all of these, the recorder that committed the deliveries has made one attempt of each
(activities/webhooks.py `first_attempts`): this workflow finds those it delivered done."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as LocalActivityTimeout

with workflow.unsafe.imports_passed_through():
    from waystation.activities.webhooks import (
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
In = TypeVar("In")
Out = TypeVar("Out")
# Runs started before the first attempt was a local activity replay so.
FIRST_ATTEMPT_LOCAL_PATCH = "webhook-first-attempt-local"
# Runs started before a large fan-out was shared among child workflows replay so.
SHARED_FAN_OUT_PATCH = "webhook-fan-out-shared"


# How a failed local activity reaches the workflow: its own error as the activity raised it (an
# ApplicationError; the SDK does not wrap it in an ActivityError as it does a regular
# activity's), or a TimeoutError.
FIRST_ATTEMPT_FAILED = (ActivityError, ApplicationError, LocalActivityTimeout)


async def first_attempt(method: Callable[[Any, In], Awaitable[Out]], arg: In, *,
                        start_to_close: timedelta, summary: str) -> Out:
    """One attempt as a local activity, no retry: the caller retries as a regular activity."""
    return await workflow.execute_local_activity_method(
        method, arg, start_to_close_timeout=start_to_close,
        retry_policy=RetryPolicy(maximum_attempts=1), summary=summary)


@workflow.defn(name=NOTIFICATION_WORKFLOW, sandboxed=False)  # see waystation/sandboxing.py
class WebhookNotification:
    @workflow.run
    async def run(self, arg: NotificationInput) -> NotificationResult:
        if arg.delivery_ids is not None:  # a share of a large fan-out (below)
            ids = arg.delivery_ids
        else:
            pending = await workflow.execute_local_activity_method(
                WebhookActivities.pending, arg, start_to_close_timeout=LOCAL_TIMEOUT,
                summary="list deliveries")
            ids, most = pending.delivery_ids, pending.per_workflow
            # More deliveries than one history holds well: each share in a child workflow,
            # so one event's fan-out never pushes a history past Temporal's limit.
            if most is not None and len(ids) > most and workflow.patched(SHARED_FAN_OUT_PATCH):
                return await self._shared(arg, [ids[i:i + most]
                                                for i in range(0, len(ids), most)])
        results = await asyncio.gather(*(self._deliver(d) for d in ids))
        return NotificationResult(statuses={str(d): r.status
                                            for d, r in zip(ids, results, strict=True)})

    async def _shared(self, arg: NotificationInput,
                      shares: list[list[UUID]]) -> NotificationResult:
        # Named from the input, as the event's own workflow is (activities/webhooks.py).
        parent = f"webhooks-{arg.run_id}-{arg.event_key}"
        results = await asyncio.gather(*(
            workflow.execute_child_workflow(
                WebhookNotification.run, arg.model_copy(update={"delivery_ids": share}),
                id=f"{parent}-share-{n}", static_summary=f"deliveries {n + 1} of {len(shares)}")
            for n, share in enumerate(shares)))
        return NotificationResult(statuses={k: v for r in results for k, v in r.statuses.items()})

    async def _deliver(self, delivery_id: UUID) -> DeliveryResult:
        arg = DeliveryInput(delivery_id=delivery_id)
        if workflow.patched(FIRST_ATTEMPT_LOCAL_PATCH):
            try:
                return await first_attempt(WebhookActivities.deliver, arg,
                                           start_to_close=SEND_TIMEOUT,
                                           summary=f"send webhook msg_{delivery_id.hex}")
            except FIRST_ATTEMPT_FAILED:
                await workflow.sleep(DELIVERY_RETRY.initial_interval)
        try:
            return await workflow.execute_activity_method(
                WebhookActivities.deliver, arg, start_to_close_timeout=SEND_TIMEOUT,
                schedule_to_close_timeout=GIVE_UP_AFTER, retry_policy=DELIVERY_RETRY,
                summary=f"send webhook msg_{delivery_id.hex}")
        except ActivityError:
            return await workflow.execute_local_activity_method(
                WebhookActivities.give_up, arg, start_to_close_timeout=LOCAL_TIMEOUT,
                summary="record delivery failed")
