"""Webhook deliveries: enqueued by the recorder, sent by one workflow per event.

Why this shape: the recorder's activity writes a gate (or a run's end) and the deliveries it
calls for in one transaction, so no notification is lost or invented; it then makes a first
attempt of each delivery at once (`first_attempts`), and then starts one
`WebhookNotification` workflow for the event (workflow id from the run and the event key, so a
retried or replayed recorder starts nothing twice), which sends each delivery that attempt did
not deliver in an activity of its own (its first try a local one,
workflows/webhook_notification.py). Temporal owns the
retries and backoff of each (days of them, across worker crashes) and the API never makes an
outbound call. The delivery id is the `webhook-id` header of every
attempt, so receivers deduplicate by it. One workflow per event rather than per delivery: a
workflow costs the server several times what an activity does, and a gate may have many
webhooks (bench_people measured 18 deliveries/s with one workflow each).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
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

from waystation.activities.start_once import start_once
from waystation.activities.webhook_targets import Target, TargetRefused, resolve
from waystation.persistence import webhooks as webhooks_repo
from waystation.persistence.sealing import SecretsBox, SecretUnreadable
from waystation.persistence.webhooks import message_id

log = logging.getLogger(__name__)
NOTIFICATION_WORKFLOW = "WebhookNotification"
SEND_TIMEOUT_SECONDS = 10.0
# How long the recorder waits for a delivery's first attempt before leaving it to the workflow.
FIRST_ATTEMPT_WITHIN_SECONDS = 2.0
# First attempts in flight at once: an event that fans out to hundreds of webhooks must not
# open hundreds of connections (and pooled database connections) from the recorder.
FIRST_ATTEMPTS_AT_ONCE = 16
# Each delivery adds about ten events to its workflow's history (attempts, the backoff timer,
# the give-up): 500 stay far below Temporal's 51,200-event limit (and its 10,240 warning).
DELIVERIES_PER_WORKFLOW = 500
# The receiver's answer, shortened, for the delivery log.
ERROR_TEXT_LIMIT = 500
# Where an A2A push config's token goes (the a2a-sdk's push sender sends it there too).
NOTIFICATION_TOKEN_HEADER = "X-A2A-Notification-Token"


class NotificationInput(BaseModel):
    run_id: UUID
    event_key: str
    # A share of a large fan-out's deliveries, sent by a child workflow of the event's (see
    # workflows/webhook_notification.py); None: every pending delivery of the event.
    delivery_ids: list[UUID] | None = None


class DeliveryInput(BaseModel):
    delivery_id: UUID


class PendingDeliveries(BaseModel):
    delivery_ids: list[UUID]
    # The most deliveries one workflow sends; more are shared among child workflows. Returned
    # here (and so recorded in the history) for replays to share them alike. None (before
    # issue 38): one workflow sends them all.
    per_workflow: int | None = None


class DeliveryResult(BaseModel):
    status: str  # delivered, failed, canceled (or what an earlier try already made it)


class NotificationResult(BaseModel):
    statuses: dict[str, str]  # by delivery id


async def start_notifications(client: Client, task_queue: str, run_id: UUID,
                              event_keys: list[str]) -> None:
    """One workflow per event; an event already started (or finished) is left alone. Started
    all at once: the run's workflow waits for this activity."""
    await asyncio.gather(*(
        start_once(client, NOTIFICATION_WORKFLOW,
                   NotificationInput(run_id=run_id, event_key=key),
                   workflow_id=f"webhooks-{run_id}-{key}", task_queue=task_queue,
                   summary=f"webhooks for {key}")
        for key in event_keys))


class WebhookActivities:
    def __init__(self, pool: asyncpg.Pool, box: SecretsBox, *,
                 private_networks: bool = True,
                 deliveries_per_workflow: int = DELIVERIES_PER_WORKFLOW) -> None:
        self._pool = pool
        self._per_workflow = deliveries_per_workflow
        self._box = box  # opens the secrets the API sealed (persistence/sealing.py)
        # See activities/webhook_targets.py.
        self._private_networks = private_networks
        # One client for every delivery: building one loads the CA bundle (tens of ms of CPU),
        # which capped deliveries at about 8 per second.
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=SEND_TIMEOUT_SECONDS)
        return self._http

    @activity.defn(name="pending_webhook_deliveries")
    async def pending(self, arg: NotificationInput) -> PendingDeliveries:
        """The deliveries of one event still to make."""
        async with self._pool.acquire() as conn:
            ids = await webhooks_repo.pending_deliveries(conn, arg.run_id, [arg.event_key])
        return PendingDeliveries(delivery_ids=ids, per_workflow=self._per_workflow)

    @activity.defn(name="deliver_webhook")
    async def deliver(self, arg: DeliveryInput) -> DeliveryResult:
        """One signed POST; raises (so Temporal retries with backoff) unless it got a 2xx."""
        result, error = await self._send(arg.delivery_id)
        if error is not None:
            raise ApplicationError(error, type="WebhookDeliveryFailed")
        return result

    async def first_attempts(self, run_id: UUID, event_keys: list[str]) -> None:
        """Each pending delivery of these events sent once, now: the recorder calls this as
        soon as it has committed them, before their workflows start, so a receiver hears of a
        gate in the time of one POST rather than after a workflow's start and first task
        (issue 31). Only the workflow retries: an attempt that fails, or takes longer than
        FIRST_ATTEMPT_WITHIN_SECONDS (the run's workflow task waits for it), is left to it;
        one cut short may have reached a slow receiver, which the retry's same webhook-id
        lets it deduplicate."""
        async with self._pool.acquire() as conn:
            ids = await webhooks_repo.pending_deliveries(conn, run_id, event_keys)

        # At most FIRST_ATTEMPTS_AT_ONCE at a time, all within FIRST_ATTEMPT_WITHIN_SECONDS of
        # now: one not begun by then is left to the workflow, so a large fan-out holds the
        # run's workflow task no longer than a small one.
        at_once = asyncio.Semaphore(FIRST_ATTEMPTS_AT_ONCE)
        deadline = time.monotonic() + FIRST_ATTEMPT_WITHIN_SECONDS

        async def attempt(delivery_id: UUID) -> None:
            async with at_once:
                try:
                    await asyncio.wait_for(self._send(delivery_id),
                                           max(0.0, deadline - time.monotonic()))
                except Exception as error:  # noqa: BLE001 - the workflow's attempts deliver it
                    log.info("first attempt of delivery %s left to its workflow: %r",
                             delivery_id, error)

        await asyncio.gather(*(attempt(i) for i in ids))

    async def _send(self, delivery_id: UUID) -> tuple[DeliveryResult, str | None]:
        """One signed POST of a pending delivery, numbered and recorded in its log: the
        delivery's status after it, and why it failed when a retry may still deliver it."""
        async with self._pool.acquire() as conn:
            delivery = await webhooks_repo.delivery_to_send(conn, delivery_id)
            if delivery is None or delivery.status != "pending":
                return DeliveryResult(status=delivery.status if delivery else "canceled"), None
            if delivery.webhook_deleted_at is not None:
                await webhooks_repo.finish_delivery(conn, delivery.id, "canceled")
                return DeliveryResult(status="canceled"), None
        body = json.dumps(delivery.payload, separators=(",", ":"))
        msg_id, now = message_id(delivery.id), datetime.now(UTC)
        began = time.monotonic()
        status_code: int | None = None
        error: str | None = None
        refused = False
        try:
            # Unreadable until the key that sealed it is back in the setting: retried, as a
            # receiver that is down would be, so no delivery is lost to a rotation mistake.
            secret = self._box.open(delivery.secret)
            headers = {"content-type": "application/json", "webhook-id": msg_id,
                       "webhook-timestamp": str(int(now.timestamp())),
                       "webhook-signature": Webhook(secret).sign(msg_id, now, body)}
            if delivery.notification_token is not None:
                # An A2A push config's own token, for its receiver to check (A2A's header).
                headers[NOTIFICATION_TOKEN_HEADER] = self._box.open(delivery.notification_token)
            if delivery.notification_authorization is not None:
                # Its `authentication`, which A2A says each delivery MUST carry.
                headers["authorization"] = self._box.open(delivery.notification_authorization)
            response = await self._post(delivery.url, body, headers)
            status_code = response.status_code
            if not response.is_success:
                # Status and reason only: the body of whatever answered (maybe an internal
                # service) never reaches the delivery log that its owner reads.
                error = f"HTTP {status_code} {response.reason_phrase}"[:ERROR_TEXT_LIMIT]
        except TargetRefused as why:
            error, refused = f"refused: {why}"[:ERROR_TEXT_LIMIT], True
        except (httpx.HTTPError, OSError, SecretUnreadable) as failure:
            # OSError: the host did not resolve.
            error = f"{type(failure).__name__}: {failure}"[:ERROR_TEXT_LIMIT]
        async with self._pool.acquire() as conn:
            # Numbered after those the log has (the recorder's first attempt, the workflow's):
            # attempts of one delivery never overlap, as each starts after the last ended.
            await webhooks_repo.record_attempt(
                conn, delivery.id, attempt=delivery.attempts + 1, status_code=status_code,
                error=error, duration_ms=int((time.monotonic() - began) * 1000),
                delivered=error is None)
            if refused:  # no retry can change where it would go
                await webhooks_repo.finish_delivery(conn, delivery.id, "failed")
                return DeliveryResult(status="failed"), None
        if error is not None:
            return DeliveryResult(status="pending"), \
                f"delivery {msg_id} to {delivery.url} failed: {error}"
        return DeliveryResult(status="delivered"), None

    async def _post(self, url: str, body: str, headers: dict[str, str]) -> httpx.Response:
        """POST to the first address of the URL's host that takes the connection (an IPv6
        address first, say, on a network without IPv6)."""
        *others, last = await resolve(url, private_networks=self._private_networks)
        for target in others:
            with contextlib.suppress(httpx.ConnectError):
                return await self._post_to(target, body, headers)
        return await self._post_to(last, body, headers)

    async def _post_to(self, target: Target, body: str,
                       headers: dict[str, str]) -> httpx.Response:
        client = self._client()
        request = client.build_request(
            "POST", target.url, content=body, headers={**headers, "host": target.host_header},
            extensions={"sni_hostname": target.sni_hostname} if target.sni_hostname else {})
        # Only the status is used: the answer's body is never read, however large.
        response = await client.send(request, stream=True)
        await response.aclose()
        return response

    @activity.defn(name="give_up_webhook")
    async def give_up(self, arg: DeliveryInput) -> DeliveryResult:
        """Retries are spent: the delivery log says so."""
        async with self._pool.acquire() as conn:
            await webhooks_repo.finish_delivery(conn, arg.delivery_id, "failed")
        return DeliveryResult(status="failed")
