"""Issue 38: a notification whose event fans out to more webhooks than one workflow history
holds well shares its deliveries among child workflows, each sending at most its share
(WAYSTATION_WEBHOOK_DELIVERIES_PER_WORKFLOW; 3 here), so no history nears Temporal's limit
however many webhooks an event reaches (time-skipping server, real PostgreSQL)."""

from __future__ import annotations

import uuid

from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker

from tests.helpers import new_validation_run
from tests.webhook_receiver import Receiver
from waystation.activities.webhooks import (
    NOTIFICATION_WORKFLOW,
    NotificationInput,
    NotificationResult,
    WebhookActivities,
)
from waystation.persistence import webhooks as webhooks_repo
from waystation.persistence.sealing import SecretsBox
from waystation.settings import DEV_SECRETS_KEY
from waystation.workflows.webhook_notification import WebhookNotification

HOOKS, SHARE = 7, 3


async def test_a_large_fan_out_is_shared_among_child_workflows(time_env, pool):
    owner = f"fan-{uuid.uuid4().hex[:6]}"
    # The installation's dev key: another test reseals every stored secret under it.
    box = SecretsBox(DEV_SECRETS_KEY)
    run = await new_validation_run(pool, owner=owner)
    queue = f"tq-{uuid.uuid4()}"
    webhooks = WebhookActivities(pool, box, deliveries_per_workflow=SHARE)
    with Receiver() as receiver:
        async with pool.acquire() as conn:
            for _ in range(HOOKS):
                await webhooks_repo.create_webhook(
                    conn, webhook_id=uuid.uuid4(), owner=owner, group_id=None,
                    url=receiver.url, secret=box.seal("whsec_" + "D" * 32),
                    events=["gate.opened"], most=HOOKS)
            [key] = await webhooks_repo.enqueue(conn, run.run_id, [webhooks_repo.Notification(
                key="gate.opened:shared", type="gate.opened", payload={"n": 1})])
        async with Worker(time_env.client, task_queue=queue, workflows=[WebhookNotification],
                          activities=[webhooks.pending, webhooks.deliver, webhooks.give_up]):
            handle = await time_env.client.start_workflow(
                NOTIFICATION_WORKFLOW, NotificationInput(run_id=run.run_id, event_key=key),
                id=f"webhooks-{run.run_id}-{key}", task_queue=queue,
                result_type=NotificationResult)
            result = await handle.result()
            parent = [e.event_type for e in (await handle.fetch_history()).events]
            shares = []
            for n in range(3):
                child = time_env.client.get_workflow_handle(f"{handle.id}-share-{n}")
                shares.append([e.event_type for e in (await child.fetch_history()).events])
    assert sorted(result.statuses.values()) == ["delivered"] * HOOKS
    assert len(receiver.received) == HOOKS
    # The parent sends nothing itself: three children, of 3, 3 and 1 deliveries.
    assert parent.count(EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED) == 3
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in parent
    # A local activity's marker per delivery (its first attempt), and the patch's marker.
    sent = [events.count(EventType.EVENT_TYPE_MARKER_RECORDED) - 1 for events in shares]
    assert sent == [3, 3, 1]
