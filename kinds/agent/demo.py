"""`waystation demo --kind agent`: the bundled planner, a search, then a booking that stops at
the `book_vendor` approval (seed 003)."""

from __future__ import annotations

import time
from typing import Any

from waystation.sdk import KindDemo

MESSAGES = ("I need a wedding venue in Bangalore for 200 guests, rustic style",
            "Book Rosewood Estate on 2027-02-14 for 200 guests")
SEND_WITHIN_S = 180.0


def _converse_until_approval(session: Any, run_id: str) -> dict[str, Any]:
    """Follow the planner's first turn to its answer, send the booking message, and follow
    the run on to the `book_vendor` approval."""
    answered = session.follow(run_id, until=("agent.answered", "end"))
    after_seq, text = int(answered["last_seq"]), MESSAGES[1]
    deadline = time.monotonic() + SEND_WITHIN_S
    # The answer is recorded a moment before the run starts waiting for the next message.
    while (sent := session.http.post(f"{session.api}/runs/{run_id}/messages",
                                     json={"text": text})
           ).status_code == 409 and time.monotonic() < deadline:
        time.sleep(0.2)
    if sent.status_code != 202:
        raise SystemExit(f"POST /runs/{run_id}/messages: {sent.status_code} {sent.text}")
    print(f"\nsent: {text}", flush=True)
    # Resumed after what was printed (the answer is the run's newest event when it is read).
    result: dict[str, Any] = session.follow(run_id, after_seq=after_seq)
    return result


def _hints(session: Any, run: dict[str, Any]) -> list[str]:
    run_id, checkpoint = run["run_id"], run["pending_checkpoint"]
    pending = run.get("pending_decision") or {}
    arguments = dict((pending.get("context") or {}).get("arguments") or {}, guests=150)
    decide = f"/runs/{run_id}/decisions/{checkpoint}"
    return ["or reject it (the agent is told why), or run it with edited arguments:",
            session.curl("POST", decide, {"decision": "reject",
                                          "feedback": "wait for the budget"}),
            session.curl("POST", decide, {"decision": "edit", "answer": arguments}),
            "then carry the conversation on (`GET` it for the transcript):",
            session.curl("POST", f"/runs/{run_id}/messages",
                         {"text": "Which are free on 2027-03-01?"})]


DEMO = KindDemo(input={"agent": "planner", "message": MESSAGES[0]},
                help="the planner agent, through a conversation to a tool approval",
                follow=_converse_until_approval, hints=_hints)
