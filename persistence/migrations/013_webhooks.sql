-- Outbound webhooks (issue 13): registrations, one delivery per (webhook, event) however often
-- it is retried, and every attempt of it.

CREATE TABLE webhooks (
    id          uuid PRIMARY KEY,
    owner       text NOT NULL,
    -- NULL: events of the owner's runs; else events of the group's runs (while the owner is
    -- a member).
    group_id    uuid REFERENCES groups (id) ON DELETE CASCADE,
    url         text NOT NULL CHECK (url ~ '^https?://'),
    -- Needed in clear to sign each delivery (HMAC); shown to the caller once, at creation.
    secret      text NOT NULL,
    events      text[] NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz
);
CREATE INDEX idx_webhooks_owner ON webhooks (owner) WHERE deleted_at IS NULL;
CREATE INDEX idx_webhooks_group ON webhooks (group_id) WHERE deleted_at IS NULL;

CREATE TABLE webhook_deliveries (
    -- The `webhook-id` header: the same on every attempt, so receivers deduplicate by it.
    id             uuid PRIMARY KEY,
    webhook_id     uuid NOT NULL REFERENCES webhooks (id),
    run_id         uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    -- What happened, chosen from the write (e.g. gate.opened:<request id>): the second
    -- enqueue of the same event for the same webhook is a no-op.
    event_key      text NOT NULL,
    event_type     text NOT NULL,
    payload        jsonb NOT NULL,
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'delivered', 'failed', 'canceled')),
    attempts       int NOT NULL DEFAULT 0,
    last_status    int,
    last_error     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    delivered_at   timestamptz,
    UNIQUE (webhook_id, event_key)
);
CREATE INDEX idx_webhook_deliveries_webhook ON webhook_deliveries (webhook_id, created_at DESC);

CREATE TABLE webhook_attempts (
    delivery_id  uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt      int NOT NULL,
    status_code  int,
    error        text,
    duration_ms  int NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (delivery_id, attempt)
);
