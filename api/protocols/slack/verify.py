"""Requests from Slack: signed with the app's signing secret over `v0:<timestamp>:<body>`, the
timestamp within five minutes (slack-sdk's SignatureVerifier), and each signature accepted
once, so a captured request sent again is refused. A refusal is a 401 and is logged (without
the secret or the body); nothing else is done with the request."""

from __future__ import annotations

import logging

import asyncpg
from fastapi import Request
from slack_sdk.signature import SignatureVerifier

from waystation.api.errors import ApiError
from waystation.persistence import slack as slack_repo

log = logging.getLogger(__name__)
# Slack sends a retry of a request it thinks was not acknowledged with this header.
RETRY_HEADER = "x-slack-retry-num"


class SlackRequest:
    """A verified request's body, and whether Slack had sent it already (a retry: answered
    as acknowledged, and not acted on twice)."""

    def __init__(self, body: bytes, *, repeated: bool) -> None:
        self.body = body
        self.repeated = repeated


async def verified(request: Request, conn: asyncpg.Connection,
                   signing_secret: str | None) -> SlackRequest:
    body = await request.body()
    timestamp = request.headers.get("x-slack-request-timestamp")
    signature = request.headers.get("x-slack-signature")
    where = f"{request.url.path} from {request.client.host if request.client else '?'}"
    if signing_secret is None:
        log.warning("refused Slack request to %s: WAYSTATION_SLACK_SIGNING_SECRET is unset",
                    where)
        raise ApiError(404, "not_found", "Slack is not configured here")
    if not signature or not timestamp or not SignatureVerifier(signing_secret).is_valid(
            body, timestamp, signature):
        log.warning("refused Slack request to %s: %s", where,
                    "unsigned" if not signature or not timestamp
                    else "bad signature or stale timestamp")
        raise ApiError(401, "invalid_signature", "the request is not signed by Slack")
    if not await slack_repo.first_sight(conn, signature):
        if request.headers.get(RETRY_HEADER):
            return SlackRequest(body, repeated=True)
        log.warning("refused Slack request to %s: replayed (its signature was seen before)",
                    where)
        raise ApiError(401, "replayed_request", "this request was already received")
    return SlackRequest(body, repeated=False)
