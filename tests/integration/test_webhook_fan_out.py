"""Issue 38: an event that fans out to many webhooks has its first attempts (the recorder's,
before the notification workflow starts) made a bounded number at a time, all within the
recorder's wait."""

from __future__ import annotations

import time
import uuid

from tests.helpers import new_validation_run
from tests.webhook_receiver import Receiver
from waystation.activities.webhooks import (
    FIRST_ATTEMPT_WITHIN_SECONDS,
    FIRST_ATTEMPTS_AT_ONCE,
    WebhookActivities,
)
from waystation.persistence import webhooks as webhooks_repo
from waystation.persistence.sealing import SecretsBox
from waystation.settings import DEV_SECRETS_KEY

HOOKS = 40


async def test_a_large_fan_outs_first_attempts_are_bounded_in_concurrency(pool):
    owner = f"fanny-{uuid.uuid4().hex[:6]}"
    # The installation's dev key: another test reseals every stored secret under it.
    box = SecretsBox(DEV_SECRETS_KEY)
    run = await new_validation_run(pool, owner=owner)
    with Receiver(delay_seconds=0.2) as receiver:
        async with pool.acquire() as conn:
            for _ in range(HOOKS):
                await webhooks_repo.create_webhook(
                    conn, webhook_id=uuid.uuid4(), owner=owner, group_id=None,
                    url=receiver.url, secret=box.seal("whsec_" + "C" * 32),
                    events=["gate.opened"], most=HOOKS)
            keys = await webhooks_repo.enqueue(conn, run.run_id, [webhooks_repo.Notification(
                key="gate.opened:fan-out", type="gate.opened", payload={"n": 1})])
        activities = WebhookActivities(pool, box, private_networks=True)
        began = time.monotonic()
        await activities.first_attempts(run.run_id, keys)
        took = time.monotonic() - began
    assert len(receiver.received) == HOOKS  # 0.2 s each, 16 at a time: all in time
    assert 2 <= receiver.most_at_once <= FIRST_ATTEMPTS_AT_ONCE
    assert took < FIRST_ATTEMPT_WITHIN_SECONDS + 1
