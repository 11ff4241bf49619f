"""Outbound webhooks: register, list, stop, and read their delivery log."""

from __future__ import annotations

import base64
import secrets
import uuid
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response

from activities.webhook_targets import registration_refusal
from api.deps import Conn, CurrentUser, SettingsDep
from api.errors import ApiError
from api.services.access import require_member
from api.webhook_schemas import (
    DeliveryList,
    DeliveryView,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookView,
)
from persistence import webhooks as webhooks_repo
from persistence.webhooks import message_id

router = APIRouter(prefix="/webhooks", tags=["webhooks"])

SECRET_BYTES = 32


@router.post("", status_code=201, response_model=WebhookCreated)
async def create_webhook(body: WebhookCreate, user: CurrentUser, conn: Conn,
                         settings: SettingsDep) -> WebhookCreated:
    """Register a webhook for the caller's runs, or a group's; the secret is shown only here.
    422 `webhook_url_refused` for a host that is or resolves to an address a webhook may not
    go to (link-local, a cloud metadata service; loopback, private and CGNAT ones unless
    allowed, see activities/webhook_targets.py)."""
    why = await registration_refusal(str(body.url),
                                     private_networks=settings.webhooks_to_private_networks)
    if why is not None:
        raise ApiError(422, "webhook_url_refused", f"url: {why}")
    if body.group_id is not None:
        await require_member(conn, user, body.group_id)
    secret = body.secret or "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()
    webhook = await webhooks_repo.create_webhook(
        conn, webhook_id=uuid.uuid4(), owner=user.name, group_id=body.group_id,
        url=str(body.url), secret=settings.secrets_box.seal(secret), events=list(body.events))
    return WebhookCreated(**WebhookView.of(webhook).model_dump(), secret=secret)


@router.get("", response_model=WebhookList)
async def list_webhooks(user: CurrentUser, conn: Conn) -> WebhookList:
    """The webhooks the caller registered (every one for the service role), without secrets."""
    webhooks = await webhooks_repo.list_webhooks(conn, user.owner_filter)
    return WebhookList(webhooks=[WebhookView.of(w) for w in webhooks])


@router.delete("/{webhook_id}", status_code=204, response_class=Response)
async def delete_webhook(webhook_id: UUID, user: CurrentUser, conn: Conn) -> Response:
    """Stop a webhook; deliveries not yet made are canceled."""
    if not await webhooks_repo.delete_webhook(conn, webhook_id, user.owner_filter):
        raise ApiError(404, "webhook_not_found", f"webhook {webhook_id} not found")
    return Response(status_code=204)


@router.get("/{webhook_id}/deliveries", response_model=DeliveryList)
async def list_deliveries(webhook_id: UUID, user: CurrentUser, conn: Conn,
                          limit: Annotated[int, Query(ge=1, le=500)] = 100) -> DeliveryList:
    """The webhook's delivery log, newest first: status, attempts, last answer."""
    owned = {w.id for w in await webhooks_repo.list_webhooks(conn, user.owner_filter)}
    if webhook_id not in owned:
        raise ApiError(404, "webhook_not_found", f"webhook {webhook_id} not found")
    deliveries = await webhooks_repo.list_deliveries(conn, webhook_id, limit)
    return DeliveryList(deliveries=[DeliveryView.of(d, message_id(d.id)) for d in deliveries])
