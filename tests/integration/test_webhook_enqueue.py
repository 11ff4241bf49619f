"""Enqueueing a write's notifications (one statement each, inside the recorder's transaction):
the keys answered are those with deliveries still to make, whether added now or by an earlier
try of the same write."""

from __future__ import annotations

import uuid

from tests.helpers import new_validation_run
from waystation.persistence import webhooks as webhooks_repo
from waystation.persistence.sealing import SecretsBox
from waystation.settings import DEV_SECRETS_KEY


def _note(key: str, kind: str) -> webhooks_repo.Notification:
    return webhooks_repo.Notification(key=key, type=kind, payload={"type": kind})


async def test_enqueue_answers_the_keys_with_deliveries_still_to_make(pool):
    owner = f"queue-{uuid.uuid4().hex[:6]}"
    run = await new_validation_run(pool, owner=owner)
    opened, decided = _note("gate.opened:q", "gate.opened"), _note("gate.decided:q", "gate.decided")
    async with pool.acquire() as conn:
        hook = uuid.uuid4()
        await webhooks_repo.create_webhook(
            conn, webhook_id=hook, owner=owner, group_id=None, url="https://hooks.example/q",
            secret=SecretsBox(DEV_SECRETS_KEY).seal("whsec_" + "Q" * 32),
            events=["gate.opened"], most=10)
        # Only the event a webhook wants has a delivery.
        assert await webhooks_repo.enqueue(conn, run.run_id, [opened, decided]) == [opened.key]
        # A retried write adds nothing, and finds the delivery still to make.
        assert await webhooks_repo.enqueue(conn, run.run_id, [opened]) == [opened.key]
        [delivery] = await webhooks_repo.pending_deliveries(conn, run.run_id, [opened.key])
        await webhooks_repo.finish_delivery(conn, delivery, "delivered")
        # Delivered: nothing left to make, and nothing added again.
        assert await webhooks_repo.enqueue(conn, run.run_id, [opened]) == []
        assert await conn.fetchval("SELECT count(*) FROM webhook_deliveries WHERE run_id = $1",
                                   run.run_id) == 1
