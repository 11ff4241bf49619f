"""Refuses oversize and non-JSON request bodies before any route reads them; and, as a 422 like
any other malformed JSON, bodies that are not UTF-8, nest too deeply for the parser, or carry
strings PostgreSQL cannot store (a NUL character, a lone UTF-16 surrogate).

Plain ASGI rather than BaseHTTPMiddleware, so streaming responses (SSE) pass through untouched.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

BODY_METHODS = {"POST", "PUT", "PATCH"}
# Cheap first looks: the JSON escapes that can make an unstorable string (\u0000,
# \ud800-\udfff), and enough brackets to nest too deeply.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89abcdefABCDEF][0-9a-fA-F]{2})")
_SUSPECT_BRACKETS = 256
# Slack posts its interactions and commands form-encoded (api/protocols/slack), and only there
# is a form taken; its JSON (an interaction's `payload`) is parsed by the endpoint.
FORM_PREFIX = "/slack/"
FORM_TYPE = "application/x-www-form-urlencoded"


class BodyLimits:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(send, 413, "payload_too_large",
                               f"request body exceeds {self.max_bytes} bytes")
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, 413, "payload_too_large",
                                   f"request body exceeds {self.max_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        form = media_type == FORM_TYPE and scope["path"].startswith(FORM_PREFIX)
        if body and media_type != "application/json" and not form:
            await self._refuse(send, 415, "unsupported_media_type",
                               "request body must be application/json")
            return
        problem = _malformed(body) if body and not form else None
        if problem:
            await self._refuse(send, 422, "invalid_request", problem)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, status: int, code: str, message: str) -> None:
        payload = json.dumps({"error": {"code": code, "message": message}}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


def _malformed(body: bytes) -> str | None:
    """What the route's own JSON parsing would fail on with a 400 or a 500, or None (also for
    plain bad JSON, which the route's validation refuses as a 422 itself)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return "body: not valid UTF-8"
    brackets = body.count(b"[") + body.count(b"{")
    if brackets < _SUSPECT_BRACKETS and not _SUSPECT_ESCAPE.search(body):
        return None
    try:
        document = json.loads(body)
    except ValueError:
        return None
    except RecursionError:
        return "body: JSON nested too deeply"

    def strings(value: Any) -> Any:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for key, item in value.items():
                yield key
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    try:
        for text in strings(document):
            if "\x00" in text:
                return "body: strings may not contain the NUL character (\\u0000)"
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return "body: strings may not contain unpaired UTF-16 surrogates"
    except RecursionError:
        return "body: JSON nested too deeply"
    return None
