"""The live model tokens a run stream sends (issue 43), as each interface maps them: the one
live loop (api/services/live.py) yields them as `Deltas` (the hub's deltas, and each message
whole so far where it started following or dropped some for a slow client), already past its
access checks. REST SSE sends each as a `message.delta` (no `id`: outside the `seq` sequence);
AG-UI as text-message and tool-call events, A2A as artifact updates, each keeping what its
client has been sent in a `Shown`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from waystation.api.schemas import MessageDelta
from waystation.api.sse import sse

DELTA_EVENT = "message.delta"


def sse_frames(deltas: Iterable[MessageDelta]) -> bytes:
    return b"".join(sse(DELTA_EVENT, d.model_dump(mode="json")) for d in deltas)


@dataclass
class Shown:
    """What one client has been sent of the messages being written, so that each delta adds
    only what it lacks: a catch-up repeats a message whole, a late delta of an ended message or
    of a failed attempt adds nothing, and a newer attempt (a retried model request) starts
    over. Keyed by the message id for its text, by the call id for a tool call's arguments."""

    sent: dict[str, int] = field(default_factory=dict)  # key -> characters sent
    attempts: dict[str, int] = field(default_factory=dict)  # message id -> attempt shown
    done: set[str] = field(default_factory=set)  # keys ended by their durable events

    def reset(self, delta: MessageDelta) -> bool:
        """Whether `delta` starts a newer attempt: what was shown of the failed one is to be
        dropped (and is forgotten here)."""
        shown = self.attempts.setdefault(delta.message_id, delta.attempt)
        if delta.attempt <= shown:
            return False
        self.attempts[delta.message_id] = delta.attempt
        self.sent.clear()
        return True

    def new(self, key: str, delta: MessageDelta) -> tuple[bool, str] | None:
        """Whether `key` is new to the client, and the text of `delta` it lacks; None when
        the delta adds nothing (or follows a missing piece: the stream sends the whole again)."""
        if delta.reset or key in self.done \
                or delta.attempt < self.attempts.get(delta.message_id, delta.attempt):
            return None
        self.attempts.setdefault(delta.message_id, delta.attempt)
        have = self.sent.get(key)
        if delta.at > (have or 0):
            return None
        text = delta.delta[(have or 0) - delta.at:]
        self.sent[key] = (have or 0) + len(text)
        return (have is None, text) if text or have is None else None

    def end(self, key: str) -> None:
        self.done.add(key)
        self.sent.pop(key, None)
