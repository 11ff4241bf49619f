"""Server-Sent Events framing, and the frame of one run event (built once, sent to many)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from waystation.api.schemas import EventView

# Every event stream's: no cache or proxy buffering holds an event back.
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no",
                  "Connection": "keep-alive"}


def sse(event: str, data: object, event_id: int | None = None) -> bytes:
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines += [f"event: {event}", f"data: {json.dumps(data, default=str)}"]
    return ("\n".join(lines) + "\n\n").encode()


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """A run event ready to send: its seq and type for the stream's bookkeeping, its frame,
    encoded once however many clients receive it, and its view for the interfaces that send
    it in a wire format of their own (AG-UI, A2A)."""

    seq: int
    type: str
    frame: bytes
    view: EventView

    @classmethod
    def of(cls, view: EventView) -> LiveEvent:
        return cls(seq=view.seq, type=view.type, view=view,
                   frame=sse(view.type, view.model_dump(mode="json"), event_id=view.seq))
