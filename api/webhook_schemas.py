"""Request and response models of outbound webhooks."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AnyUrl, BaseModel, ConfigDict, Field, UrlConstraints, field_validator

from waystation.persistence.webhooks import DeliveryRow, WebhookRow

WebhookEvent = Literal["gate.opened", "gate.reminded", "gate.escalated", "gate.decided",
                       "gate.expired", "run.finished"]
# http(s) only, as the spec and our SSRF stance want: no file:, ftp:, javascript: ...
WebhookUrl = Annotated[AnyUrl, UrlConstraints(allowed_schemes=["http", "https"],
                                              max_length=2000, host_required=True)]
# Standard Webhooks secrets: "whsec_" and base64 of 24 to 64 random bytes.
SECRET_PATTERN = r"^whsec_[A-Za-z0-9+/]{32,88}={0,2}$"


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: WebhookUrl
    secret: str | None = Field(None, pattern=SECRET_PATTERN,
                               description="`whsec_` + base64 of 24-64 bytes; generated "
                                           "when absent (and shown once).")
    events: list[WebhookEvent] = Field(min_length=1, max_length=6)
    group_id: UUID | None = Field(None, description="Events of this group's runs (you must "
                                                    "be a member) instead of your own runs'.")

    @field_validator("events")
    @classmethod
    def _distinct(cls, events: list[str]) -> list[str]:
        return sorted(set(events))


class WebhookView(BaseModel):
    webhook_id: UUID
    url: str
    events: list[str]
    group_id: UUID | None
    run_id: UUID | None = Field(None, description="Events of this one run only (an A2A "
                                                  "task's push notification config).")
    created_at: datetime

    @classmethod
    def of(cls, webhook: WebhookRow) -> WebhookView:
        return cls(webhook_id=webhook.id, url=webhook.url, events=webhook.events,
                   group_id=webhook.group_id, run_id=webhook.run_id,
                   created_at=webhook.created_at)


class WebhookCreated(WebhookView):
    secret: str = Field(description="Verify signatures with it; it is never shown again.")


class WebhookList(BaseModel):
    webhooks: list[WebhookView]


class DeliveryView(BaseModel):
    delivery_id: UUID
    webhook_id_header: str = Field(description="The `webhook-id` every attempt carried.")
    run_id: UUID
    event_type: str
    status: str
    attempts: int
    last_status: int | None
    last_error: str | None
    payload: dict[str, Any]
    created_at: datetime
    delivered_at: datetime | None

    @classmethod
    def of(cls, delivery: DeliveryRow, header: str) -> DeliveryView:
        return cls(delivery_id=delivery.id, webhook_id_header=header,
                   **delivery.model_dump(exclude={"id", "webhook_id", "event_key"}))


class DeliveryList(BaseModel):
    deliveries: list[DeliveryView]
