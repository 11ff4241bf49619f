"""Webhook deliveries: enqueued by the recorder, each sent by its own workflow's activity.

Why this shape: the recorder's activity writes a gate (or a run's end) and the deliveries it
calls for in one transaction, so no notification is lost or invented; it then starts one
`WebhookDelivery` workflow per delivery, with the delivery's id as workflow id, so a retried
or replayed recorder starts nothing twice. Temporal then owns the retries and backoff (hours
of them, across worker crashes) and the API never makes an outbound call. The delivery id is
the `webhook-id` header of every attempt, so receivers deduplicate by it.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from uuid import UUID

import asyncpg
import httpx
from pydantic import BaseModel
from standardwebhooks import Webhook
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.start_once import start_once
from persistence import webhooks as webhooks_repo
from persistence.webhooks import message_id

DELIVERY_WORKFLOW = "WebhookDelivery"
SEND_TIMEOUT_SECONDS = 10.0
# The receiver's answer, shortened, for the delivery log.
ERROR_TEXT_LIMIT = 500


class DeliveryInput(BaseModel):
    delivery_id: UUID


class DeliveryResult(BaseModel):
    status: str  # delivered, failed, canceled (or what an earlier try already made it)


def delivery_workflow_id(delivery_id: UUID) -> str:
    return f"webhook-{delivery_id}"


async def start_deliveries(client: Client, task_queue: str, deliveries: list[UUID]) -> None:
    """One workflow per delivery; a delivery already started (or finished) is left alone."""
    for delivery_id in deliveries:
        await start_once(client, DELIVERY_WORKFLOW, DeliveryInput(delivery_id=delivery_id),
                         workflow_id=delivery_workflow_id(delivery_id), task_queue=task_queue,
                         summary=f"webhook delivery {message_id(delivery_id)}")


class WebhookActivities:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @activity.defn(name="deliver_webhook")
    async def deliver(self, arg: DeliveryInput) -> DeliveryResult:
        """One signed POST; raises (so Temporal retries with backoff) unless it got a 2xx."""
        async with self._pool.acquire() as conn:
            delivery = await webhooks_repo.delivery_to_send(conn, arg.delivery_id)
            if delivery is None or delivery.status != "pending":
                return DeliveryResult(status=delivery.status if delivery else "canceled")
            if delivery.webhook_deleted_at is not None:
                await webhooks_repo.finish_delivery(conn, delivery.id, "canceled")
                return DeliveryResult(status="canceled")
        body = json.dumps(delivery.payload, separators=(",", ":"))
        msg_id, now = message_id(delivery.id), datetime.now(UTC)
        headers = {"content-type": "application/json", "webhook-id": msg_id,
                   "webhook-timestamp": str(int(now.timestamp())),
                   "webhook-signature": Webhook(delivery.secret).sign(msg_id, now, body)}
        began = time.monotonic()
        status_code: int | None = None
        error: str | None = None
        try:
            async with httpx.AsyncClient(timeout=SEND_TIMEOUT_SECONDS) as http:
                response = await http.post(delivery.url, content=body, headers=headers)
            status_code = response.status_code
            if not response.is_success:
                error = f"HTTP {status_code}: {response.text[:ERROR_TEXT_LIMIT]}"
        except httpx.HTTPError as failure:
            error = f"{type(failure).__name__}: {failure}"[:ERROR_TEXT_LIMIT]
        async with self._pool.acquire() as conn:
            await webhooks_repo.record_attempt(
                conn, delivery.id, attempt=activity.info().attempt, status_code=status_code,
                error=error, duration_ms=int((time.monotonic() - began) * 1000),
                delivered=error is None)
        if error is not None:
            raise ApplicationError(f"delivery {msg_id} to {delivery.url} failed: {error}",
                                   type="WebhookDeliveryFailed")
        return DeliveryResult(status="delivered")

    @activity.defn(name="give_up_webhook")
    async def give_up(self, arg: DeliveryInput) -> DeliveryResult:
        """Retries are spent: the delivery log says so."""
        async with self._pool.acquire() as conn:
            await webhooks_repo.finish_delivery(conn, arg.delivery_id, "failed")
        return DeliveryResult(status="failed")
