"""Where the live loop joins a run's messages being written (or has dropped deltas), each
message whole so far goes first, then only the deltas held that add to it: a delta published
while the wholes were read may be in them already, and must not be sent twice."""

from __future__ import annotations

import uuid

from waystation.api.schemas import MessageDelta
from waystation.api.services.deltas import beyond

RUN = uuid.uuid4()


def piece(at: int, delta: str, *, attempt: int = 1, call_id: str | None = None,
          reset: bool = False, message_id: str = "m1") -> MessageDelta:
    return MessageDelta(run_id=RUN, message_id=message_id, attempt=attempt, at=at, delta=delta,
                        call_id=call_id, reset=reset)


def test_only_what_the_whole_lacks_follows_it() -> None:
    whole = [piece(0, "Hello"), piece(0, '{"q":', call_id="c1")]
    held = [
        piece(3, "lo"),                  # in the whole already
        piece(5, " world"),              # past its end
        piece(0, '{"q":', call_id="c1"),  # the call's arguments so far: in the whole
        piece(5, '"x"}', call_id="c1"),  # the rest of them
        piece(0, "Hi", message_id="m2"),  # a message the wholes did not have yet
    ]
    assert beyond(whole, held) == [held[1], held[3], held[4]]


def test_a_retry_s_pieces_follow_but_not_a_reset_the_whole_already_shows() -> None:
    whole = [piece(0, "Sec", attempt=2)]
    held = [
        piece(0, "Fir", attempt=1),            # the failed attempt's
        piece(0, "", attempt=2, reset=True),   # the reset the whole is after: it would empty it
        piece(3, "ond", attempt=2),
        piece(0, "", attempt=3, reset=True),   # a newer retry starts over
    ]
    assert beyond(whole, held) == [held[2], held[3]]
