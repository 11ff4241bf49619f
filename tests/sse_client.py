"""A small SSE client for tests and benchmarks (what a browser's EventSource does)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class SseEvent:
    event: str
    data: Any
    id: int | None


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    event, data, event_id = "message", [], None
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SseEvent(event=event, data=json.loads("\n".join(data)), id=event_id)
            event, data, event_id = "message", [], None
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                event_id = int(value)
