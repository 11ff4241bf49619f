"""Repository functions for webhooks, their deliveries and attempts (migration 013)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg
from pydantic import BaseModel

from waystation.persistence.db import Conflict
from waystation.persistence.models import Row
from waystation.persistence.queries import sql
from waystation.persistence.sealing import SecretsBox, SecretUnreadable


def message_id(delivery_id: UUID) -> str:
    """The `webhook-id` header of every attempt of a delivery."""
    return f"msg_{delivery_id.hex}"


class WebhookRow(Row):
    id: UUID
    owner: str
    group_id: UUID | None
    url: str
    secret: str
    events: list[str]
    created_at: datetime
    deleted_at: datetime | None
    # Events of this one run only (migration 046).
    run_id: UUID | None = None
    # Sent to the receiver with each delivery, sealed (migration 065).
    notification_token: str | None = None
    # The `Authorization` header's value for the receiver, sealed (migration 083).
    notification_authorization: str | None = None


class DeliveryRow(Row):
    id: UUID
    webhook_id: UUID
    run_id: UUID
    event_key: str
    event_type: str
    payload: dict[str, Any]
    status: str
    attempts: int
    last_status: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


class DeliveryToSend(DeliveryRow):
    url: str
    secret: str
    notification_token: str | None
    notification_authorization: str | None
    webhook_deleted_at: datetime | None


class Notification(Row):
    """One event of a run that webhooks may want: `key` identifies it for good."""

    key: str
    type: str
    payload: dict[str, Any]


class TooManyWebhooks(Conflict):
    """The owner already holds as many live webhooks (or push configs) as allowed; nothing
    was written."""


async def create_webhook(conn: asyncpg.Connection, *, webhook_id: UUID, owner: str,
                         group_id: UUID | None, url: str, secret: str,
                         events: list[str], most: int, run_id: UUID | None = None,
                         notification_token: str | None = None,
                         notification_authorization: str | None = None) -> WebhookRow:
    """A new webhook unless `owner` holds `most` live ones of its sort already (for one run
    or not). Raises TooManyWebhooks."""
    async with conn.transaction():
        await conn.execute(sql("lock_user_webhooks"), owner)
        if await conn.fetchval(sql("count_live_webhooks"), owner, run_id is not None) >= most:
            sort = "push configs (webhooks for one task)" if run_id else "webhooks"
            raise TooManyWebhooks(f"at most {most} live {sort} per user: delete one before "
                                  f"registering another")
        record = await conn.fetchrow(sql("insert_webhook"), webhook_id, owner, group_id, url,
                                     secret, events, run_id, notification_token,
                                     notification_authorization)
    return WebhookRow.from_record(record)


class Resealed(BaseModel):
    """What `reseal_secrets` did: sealed under the first key now, already so, unreadable."""

    resealed: int
    unchanged: int
    unreadable: list[UUID]


async def reseal_secrets(conn: asyncpg.Connection, box: SecretsBox) -> Resealed:
    """Seal every stored webhook secret (and A2A notification token and authorization) under
    the box's first key: after a new key is put first, and once for secrets stored before
    sealing existed. Safe to run again."""
    resealed, unchanged, unreadable = 0, 0, []
    for row in await conn.fetch(sql("webhook_secrets")):
        stored = [row["secret"], row["notification_token"], row["notification_authorization"]]
        if all(value is None or box.sealed_under_first(value) for value in stored):
            unchanged += 1
            continue
        try:
            sealed = [box.seal(box.open(value)) if value is not None else None
                      for value in stored]
        except SecretUnreadable:
            unreadable.append(row["id"])
            continue
        # Not counted when the row changed since it was read (a concurrent reseal did it).
        if await conn.execute(sql("reseal_webhook_secret"), row["id"], stored[0], sealed[0],
                              stored[1], sealed[1], stored[2], sealed[2]) == "UPDATE 1":
            resealed += 1
    return Resealed(resealed=resealed, unchanged=unchanged, unreadable=unreadable)


async def list_webhooks(conn: asyncpg.Connection, owner: str | None,
                        run_id: UUID | None = None) -> list[WebhookRow]:
    return [WebhookRow.from_record(r)
            for r in await conn.fetch(sql("list_webhooks"), owner, run_id)]


async def delete_webhook(conn: asyncpg.Connection, webhook_id: UUID, owner: str | None) -> bool:
    return await conn.fetchval(sql("delete_webhook"), webhook_id, owner) is not None


async def enqueue(conn: asyncpg.Connection, run_id: UUID,
                  notifications: list[Notification]) -> list[str]:
    """Deliveries for each notification to every webhook that wants it; returns the keys of
    the notifications with pending deliveries (those enqueued by an earlier try included)."""
    for note in notifications:
        await conn.execute(sql("enqueue_deliveries"), run_id, note.key, note.type, note.payload)
    records = await conn.fetch(sql("pending_deliveries_of"), run_id,
                               [n.key for n in notifications])
    return sorted({r["event_key"] for r in records})


async def pending_deliveries(conn: asyncpg.Connection, run_id: UUID,
                             event_keys: list[str]) -> list[UUID]:
    records = await conn.fetch(sql("pending_deliveries_of"), run_id, event_keys)
    return [r["id"] for r in records]


async def delivery_to_send(conn: asyncpg.Connection, delivery_id: UUID) -> DeliveryToSend | None:
    record = await conn.fetchrow(sql("delivery_to_send"), delivery_id)
    return DeliveryToSend.from_record(record) if record else None


async def record_attempt(conn: asyncpg.Connection, delivery_id: UUID, *, attempt: int,
                         status_code: int | None, error: str | None, duration_ms: int,
                         delivered: bool) -> None:
    await conn.execute(sql("record_attempt"), delivery_id, attempt, status_code, error,
                       duration_ms, delivered)


async def finish_delivery(conn: asyncpg.Connection, delivery_id: UUID, status: str) -> None:
    await conn.execute(sql("finish_delivery"), delivery_id, status)


async def list_deliveries(conn: asyncpg.Connection, webhook_id: UUID,
                          limit: int) -> list[DeliveryRow]:
    records = await conn.fetch(sql("list_deliveries"), webhook_id, limit)
    return [DeliveryRow.from_record(r) for r in records]
