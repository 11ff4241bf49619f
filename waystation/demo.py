"""`waystation demo`: start a kind's demo run on a running stack, follow it live to its first
gate, and print how to decide it (a kind says what its demo starts: `CliHooks.demo`)."""

from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx

from waystation.contracts.kinds import RunKind
from waystation.settings import Settings

DEMO_TIMEOUT_S = 180.0


@dataclass
class DemoSession:
    """The API a demo talks to, as a kind's `KindDemo.follow` and `hints` see it."""

    http: httpx.Client
    api: str
    token: str

    def curl(self, method: str, path: str, body: dict[str, Any] | None = None) -> str:
        """The command a person pastes to make this request with the demo's token."""
        line = f'curl -X {method} {self.api}{path} -H "Authorization: Bearer {self.token}"'
        if body is not None:
            # Quoted for the shell: a value may hold a quote (an agent's arguments).
            line += f" -H 'Content-Type: application/json' -d {shlex.quote(json.dumps(body))}"
        return line

    def follow(self, run_id: str, *, until: tuple[str, ...] = ("gate.opened", "end"),
               after_seq: int = 0) -> dict[str, Any]:
        """Print the run's live events (its SSE stream) until it asks a human or ends (or any
        event of `until`); the run's view (`GET /runs/{id}`) then."""
        deadline = time.monotonic() + DEMO_TIMEOUT_S
        url = f"{self.api}/runs/{run_id}/events/stream?after_seq={after_seq}"
        print(f"following {url}\n", flush=True)
        event, written = "", Written()
        # A read waits at most a few heartbeats; the stream itself may last minutes.
        with self.http.stream("GET", url, timeout=httpx.Timeout(10.0, read=60.0)) as response:
            if response.status_code != 200:
                raise SystemExit(f"GET {url}: {response.status_code} {response.read().decode()}")
            for line in response.iter_lines():
                if time.monotonic() > deadline:
                    raise SystemExit(f"gave up after {DEMO_TIMEOUT_S:.0f}s following {url}")
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event == "message.delta":
                    written.show(json.loads(line.removeprefix("data: ")))
                elif line.startswith("data: ") and event not in ("", "end"):
                    written.end_line()
                    data = json.loads(line.removeprefix("data: "))
                    where = "/".join(x for x in (data.get("crew"), data.get("task")) if x)
                    pct = (f" {data['progress_pct']}%" if data.get("progress_pct") is not None
                           else "")
                    print(f"  #{data['seq']:<4} {event:<20} {where}{pct}", flush=True)
                if line == "" and event in until:
                    break
        run: dict[str, Any] = self.http.get(f"{self.api}/runs/{run_id}").json()
        return run


class Written:
    """A model's answer printed as it is written (`message.delta`, outside the event sequence):
    each delta's part the terminal lacks, on a line of its own; a retried request's reset
    starts the line again."""

    def __init__(self) -> None:
        self.message: str | None = None
        self.shown = 0

    def show(self, delta: dict[str, Any]) -> None:
        if delta.get("call_id") is not None:
            return
        if delta["message_id"] != self.message or delta.get("reset"):
            self.end_line()
            self.message, self.shown = delta["message_id"], 0
            print("        writing: " if not delta.get("reset") else "        (retried) ",
                  end="", flush=True)
        text = delta["delta"][max(0, self.shown - delta["at"]):]
        if delta["at"] <= self.shown and text:
            print(text, end="", flush=True)
            self.shown += len(text)

    def end_line(self) -> None:
        if self.message is not None:
            print(flush=True)
            self.message = None


def run_demo(settings: Settings, kind: RunKind, *, api: str | None, token: str | None) -> int:
    from waystation.api.auth import issue_token
    from waystation.devstack import read_state

    demo = kind.cli.demo
    assert demo is not None
    # The URLs of the stack `waystation up` runs from this data folder, whatever ports it was
    # given (--api-port, --ui-port); else the settings'.
    stack = read_state(settings.data_path) or {}
    urls = stack.get("urls", {}) if stack.get("status") == "up" else {}
    api = (api or urls.get("api") or f"http://{settings.api_host}:{settings.api_port}").rstrip("/")
    token = token or issue_token(settings.jwt_secret, "dev")
    body = {"kind": kind.name, "input": dict(demo.input)}

    with httpx.Client(timeout=10.0, headers={"Authorization": f"Bearer {token}"}) as http:
        session = DemoSession(http=http, api=api, token=token)
        try:
            response = http.post(f"{api}/runs", json=body)
        except httpx.ConnectError:
            print(f"cannot reach the API at {api}; is `waystation up` running?", file=sys.stderr)
            return 1
        if response.status_code >= 400:
            print(f"POST /runs failed: {response.status_code} {response.text}", file=sys.stderr)
            return 1
        run_id = response.json()["run_id"]
        print(f"started run {run_id}; its events until it asks a human:", flush=True)
        follow = demo.follow
        run = follow(session, run_id) if follow else session.follow(run_id)

    ns = settings.temporal_namespace
    ui = (urls.get("temporal_ui") or settings.temporal_ui_base).rstrip("/")
    print()
    print(f"Run id:          {run_id}")
    print(f"Status:          {run.get('status')} (phase {run.get('current_phase')})")
    print(f"Temporal Web UI: {ui}/namespaces/{ns}/workflows/{kind.workflow_id(run_id)}")
    print(f"Events:          {api}/runs/{run_id}/events")
    print(f"Live:            curl -N -H 'Authorization: Bearer {token}' "
          f"{api}/runs/{run_id}/events/stream")
    checkpoint = run.get("pending_checkpoint")
    if not checkpoint:
        print("The run did not stop at a checkpoint.")
        return 0 if run.get("status") == "completed" else 1
    pending = run.get("pending_decision") or {}
    print(f"Checkpoint:      {checkpoint} — {pending.get('title', '')}")
    options = ", ".join(o["value"] for o in pending.get("options", []))
    print(f"Options:         {options} (recommended: {pending.get('recommended_option')})")
    print(f"Inbox:           curl -H 'Authorization: Bearer {token}' {api}/decisions")
    print()
    print("Decide it with:")
    print(session.curl("POST", f"/runs/{run_id}/decisions/{checkpoint}",
                       {"decision": "approve", "feedback": "looks good"}))
    for line in demo.hints(session, run) if demo.hints else ():
        print(line)
    return 0
