"""Outbound webhooks: register one (for the caller's runs, a group's, or one run's), list the
caller's, stop one, read one's delivery log. The worker delivers them, signed per Standard
Webhooks (workflows/webhook_notification.py)."""

from __future__ import annotations

import base64
import secrets
import uuid
from uuid import UUID

import asyncpg

from waystation.activities.webhook_targets import registration_refusal
from waystation.api.auth import User
from waystation.api.errors import ApiError
from waystation.api.services.access import require_group_decider
from waystation.api.webhook_schemas import (
    DeliveryList,
    DeliveryView,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookView,
)
from waystation.persistence import webhooks as webhooks_repo
from waystation.persistence.models import RunRow
from waystation.settings import Settings

SECRET_BYTES = 32


async def create_webhook(conn: asyncpg.Connection, user: User, body: WebhookCreate, *,
                         settings: Settings, run: RunRow | None = None,
                         notification_token: str | None = None,
                         notification_authorization: str | None = None) -> WebhookCreated:
    """Register a webhook for the caller's runs, a group's (`body.group_id`), or one run the
    caller may read (`run`, found by `runs.visible_run`); the secret is shown only here.
    `notification_token`: an A2A push config's opaque token, sent with every delivery;
    `notification_authorization`: its `authentication`, the `Authorization` header sent so.
    422 `webhook_url_refused` for a host that is or resolves to an address a webhook may not
    go to (link-local, a cloud metadata service; loopback, private and CGNAT ones unless
    allowed, see activities/webhook_targets.py)."""
    why = await registration_refusal(str(body.url),
                                     private_networks=settings.webhooks_to_private_networks)
    if why is not None:
        raise ApiError(422, "webhook_url_refused", f"url: {why}",
                       details=[{"loc": ["body", "url"], "msg": why,
                                 "type": "webhook_url_refused"}])
    if body.group_id is not None:
        await require_group_decider(conn, user, body.group_id, "register its webhooks")
    secret = body.secret or "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()
    try:
        webhook = await webhooks_repo.create_webhook(
            conn, webhook_id=uuid.uuid4(), owner=user.name, group_id=body.group_id,
            url=str(body.url), secret=settings.secrets_box.seal(secret), events=list(body.events),
            run_id=run.id if run is not None else None,
            most=(settings.max_push_configs_per_user if run is not None
                  else settings.max_webhooks_per_user),
            notification_token=settings.secrets_box.seal(notification_token)
            if notification_token else None,
            notification_authorization=settings.secrets_box.seal(notification_authorization)
            if notification_authorization else None)
    except webhooks_repo.TooManyWebhooks as error:
        raise ApiError(409, "too_many_webhooks", str(error)) from error
    return WebhookCreated(**WebhookView.of(webhook).model_dump(), secret=secret)


async def list_webhooks(conn: asyncpg.Connection, user: User, *,
                        run: RunRow | None = None) -> WebhookList:
    """The webhooks the caller registered (every one for the service role), or those for one
    run; without secrets."""
    webhooks = await webhooks_repo.list_webhooks(conn, user.owner_filter,
                                                 run.id if run is not None else None)
    return WebhookList(webhooks=[WebhookView.of(w) for w in webhooks])


async def delete_webhook(conn: asyncpg.Connection, user: User, webhook_id: UUID, *,
                         run: RunRow | None = None) -> None:
    """Stop one of the caller's webhooks (with `run`: one for that run); deliveries not yet
    made are canceled. 404 for any other."""
    if run is not None and webhook_id not in {
            w.webhook_id for w in (await list_webhooks(conn, user, run=run)).webhooks}:
        raise ApiError(404, "webhook_not_found", f"webhook {webhook_id} not found")
    if not await webhooks_repo.delete_webhook(conn, webhook_id, user.owner_filter):
        raise ApiError(404, "webhook_not_found", f"webhook {webhook_id} not found")


async def deliveries(conn: asyncpg.Connection, user: User, webhook_id: UUID,
                     limit: int) -> DeliveryList:
    """One of the caller's webhooks' delivery log, newest first: status, attempts, last
    answer. 404 for any other webhook."""
    owned = {w.id for w in await webhooks_repo.list_webhooks(conn, user.owner_filter)}
    if webhook_id not in owned:
        raise ApiError(404, "webhook_not_found", f"webhook {webhook_id} not found")
    found = await webhooks_repo.list_deliveries(conn, webhook_id, limit)
    return DeliveryList(deliveries=[DeliveryView.of(d, webhooks_repo.message_id(d.id))
                                    for d in found])
