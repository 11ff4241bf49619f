"""`waystation demo --kind agent`: the bundled planner, a search, a shortlist, a question about
the plan (answered from the conversation, not booked: issue 43's follow-up), then a booking
that stops at the `book_vendor` approval (seed 003)."""

from __future__ import annotations

import time
from typing import Any

from waystation.sdk import KindDemo

MESSAGES = ("I need a wedding venue in Bangalore for 200 guests, rustic style",
            "Shortlist the first three",
            "Which three did you shortlist, and is the booking confirmed?",
            "Book Rosewood Estate on 2027-02-14 for 200 guests")
SEND_WITHIN_S = 180.0


def _converse_until_approval(session: Any, run_id: str) -> dict[str, Any]:
    """Follow each of the planner's turns to its answer, print it, send the next message,
    and follow the last on to the `book_vendor` approval."""
    after_seq = 0
    for text in MESSAGES[1:]:
        answered = session.follow(run_id, until=("agent.answered", "end"), after_seq=after_seq)
        # The turn's transcript: from where the previous turn's answer was printed.
        said = session.http.get(f"{session.api}/runs/{run_id}/messages",
                                params={"after_seq": after_seq}).json()["messages"]
        after_seq = int(answered["last_seq"])
        print(f"\nplanner: {[m for m in said if m['role'] == 'agent'][-1]['text']}", flush=True)
        _send(session, run_id, text)
    # Resumed after what was printed (the answer is the run's newest event when it is read).
    result: dict[str, Any] = session.follow(run_id, after_seq=after_seq)
    return result


def _send(session: Any, run_id: str, text: str) -> None:
    deadline = time.monotonic() + SEND_WITHIN_S
    # The answer is recorded a moment before the run starts waiting for the next message.
    while (sent := session.http.post(f"{session.api}/runs/{run_id}/messages",
                                     json={"text": text})
           ).status_code == 409 and time.monotonic() < deadline:
        time.sleep(0.2)
    if sent.status_code != 202:
        raise SystemExit(f"POST /runs/{run_id}/messages: {sent.status_code} {sent.text}")
    print(f"\nsent: {text}", flush=True)


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
            session.curl("POST", f"/runs/{run_id}/messages", {"text": MESSAGES[2]})]


DEMO = KindDemo(input={"agent": "planner", "message": MESSAGES[0]},
                help="the planner agent, through a conversation to a tool approval",
                follow=_converse_until_approval, hints=_hints)
