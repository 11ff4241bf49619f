"""The two latencies a person feels, through the whole stack, with many runs waiting.

    python -m bench.bench_human [--waiting 1000] [--people 20] [--clicks 100]
                                [--agent-clicks 40] [--warm 15] [--notices 50]

One local stack as `waystation up` runs it (`waystation.testing.local_stack(processes=True)`:
embedded PostgreSQL, a Temporal dev server, `waystation worker` with the noop backend and
`waystation api`, each its own process), a local webhook receiver (uvicorn) and a local SMTP
server (aiosmtpd) in this process beside the people. `--in-process` runs the worker and the API
in this process too (as bench.bench_people does), sharing its event loop with the people.
First `--waiting` validation runs are started through the API and wait at their first gate,
with `--clicks` more validation runs and `--agent-clicks` agent runs (the planner asked to
book a vendor: its booking waits for approval) besides.

(a) Click → next step: first one person (`--solo` clicks, one at a time), then the same
person on `--warm` validation runs started last (still in the worker's cache of 1,000
workflows, where the runs started first, with 1,000 runs waiting, are not: their Update first
replays the run's history), then `--people` people at once, each taking the next gated run:
open the
run's SSE stream (`/runs/{id}/events/stream`), read it up to its `gate.opened`, then all click
at once (`POST /runs/{id}/decisions/{checkpoint}`), in bursts (the next once the work the
clicks set off is done); timed from the click to the first event of the
next step seen on the stream (the first event after the click that is not a gate's: the next
phase's `phase.started`, the approved tool's `tool.returned`). Baselines in the same sitting:
DBOS's in-process resume (bench.peers_dbos, the toy: `send` → the next step's event, in its own
process and database on the same PostgreSQL server), and a raw Temporal Update → the next
activity's start on the same dev server (bench.common.RawGate).

(b) Gate opened → the person told: a webhook on `gate.opened` and the run owner's email
address, then `--notices` validation runs started one after another while the others wait;
from the request's row (`hitl_requests.created_at`) to the webhook's arrival at the receiver,
to the mail's acceptance by the SMTP server, and to the Slack message's arrival at the local
stand-in for Slack's Web API (tests/slack_stub.py). Baselines: the same process POSTing
straight to the receiver, sending one mail straight to the SMTP server (waystation.activities.smtp),
and calling chat.postMessage on the stand-in straight (waystation.activities.slack.web_api).

(c) Click in Slack → next step: on those `--notices` runs, the owner (linked to a Slack user)
clicks Approve on each message, one at a time: a signed interaction posted to
`/slack/interactions`, timed to the next step's first event on the run's SSE stream, beside
the same person's click through the API in (a).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from aiosmtpd.controller import Controller
from pydantic import BaseModel
from temporalio.worker import Worker

from bench.bench_people import Receiver, wait_for
from bench.bench_validation import GATE, IDEA, Bench, log, raw_decisions
from bench.common import RawGate, RawShape, markdown_table, percentile, raw_task
from bench.peers_common import Figures
from tests.slack_client import SIGNING_SECRET, SlackPerson
from tests.slack_stub import TOKEN, Message, SlackStub
from waystation.activities.slack.web_api import SlackConfig, SlackWebApi
from waystation.activities.smtp import send_mail
from waystation.testing import LocalStack, create_database, free_port, local_stack, sse_events

AGENT_GATE = "approve_book_vendor_1"
# Names a vendor and says "book": the planner's first request asks for `book_vendor`, which
# waits for approval (tests/agent_helpers.py's BOOK).
BOOK = "Book Rosewood Estate on 2027-02-14 for 200 guests"
OWNER = "bench"
# The waiting runs belong to this many people (one person's writes are rate-limited).
CROWD = 50
ADDRESS = "bench@example.com"
SLACK_CHANNEL = "CBENCH"
SLACK_USER = "UBENCH"


class Click(BaseModel):
    """One gated run a person decides."""
    run_id: str
    kind: str
    checkpoint: str
    owner: str


@dataclass
class Inbox:
    """A local SMTP server's arrivals: (wall time, To) of each mail accepted."""
    arrivals: list[tuple[float, str]] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.arrivals.append((time.time(), ",".join(envelope.rcpt_tos)))
        return "250 OK"


# --- the runs ----------------------------------------------------------------------------------


async def start(http: httpx.AsyncClient, kind: str, owner: str) -> Click:
    body = ({"entrepreneur_input": IDEA, "gates": [GATE]} if kind == "validation"
            else {"message": BOOK})
    response = await http.post("/runs", json={"kind": kind, "input": body})
    assert response.status_code == 201, response.text
    return Click(run_id=response.json()["run_id"], kind=kind,
                 checkpoint=GATE if kind == "validation" else AGENT_GATE, owner=owner)


async def fill(stack: LocalStack, crowd: dict[str, httpx.AsyncClient],
               kinds: list[str]) -> list[Click]:
    """Start the runs 20 at a time, by the crowd in turn, and wait until all wait."""
    limit = asyncio.Semaphore(20)
    owners = list(crowd)

    async def one(index: int, kind: str) -> Click:
        owner = owners[index % len(owners)]
        async with limit:
            return await start(crowd[owner], kind, owner)
    began = time.perf_counter()
    clicks = await asyncio.gather(*(one(i, kind) for i, kind in enumerate(kinds)))

    async def pending() -> int:
        async with stack.pool.acquire() as conn:
            return int(await conn.fetchval(
                "SELECT count(*) FROM hitl_requests WHERE status = 'pending'"))
    while (waiting := await pending()) < len(kinds):
        log(f"{waiting}/{len(kinds)} runs waiting")
        await asyncio.sleep(5)
    log(f"{len(kinds)} runs waiting after {time.perf_counter() - began:.0f} s")
    return list(clicks)


# --- (a) click → next step ---------------------------------------------------------------------


async def click(crowd: dict[str, httpx.AsyncClient], run: Click,
                together: asyncio.Barrier) -> float:
    """Seconds from the click to the next step's first event on the run's SSE stream."""
    http = crowd[run.owner]
    async with http.stream("GET", f"/runs/{run.run_id}/events/stream") as response:
        events = sse_events(response)
        async for event in events:  # the run's past, up to the question
            if event.event == "gate.opened":
                break
        await together.wait()  # everyone has the question on screen: all click at once
        sent = time.perf_counter()
        decided = asyncio.create_task(http.post(
            f"/runs/{run.run_id}/decisions/{run.checkpoint}", json={"decision": "approve"}))
        seen: float | None = None
        async for event in events:
            if event.id is not None and not event.event.startswith("gate."):
                seen = time.perf_counter()
                break
        response_ = await decided
        if seen is None:
            raise RuntimeError(f"run {run.run_id}'s stream ended before its next step")
        assert response_.status_code == 200, response_.text
    return seen - sent


# A decided run is done with the work its click set off when one of these is written.
SETTLED = ("run.completed", "run.failed", "agent.answered")


async def people(stack: LocalStack, crowd: dict[str, httpx.AsyncClient], runs: list[Click],
                 count: int) -> dict[str, list[float]]:
    """Bursts of `count` people clicking at once; latencies by kind. Each burst's runs finish
    the work the clicks set off before the next burst, so that a burst measures 20 people
    deciding at once, not the backlog of the bursts before it (people think between two
    decisions; clicking back to back would measure the worker's throughput instead)."""
    samples: dict[str, list[float]] = {}
    for first in range(0, len(runs), count):
        burst = runs[first:first + count]
        together = asyncio.Barrier(len(burst))
        seconds = await asyncio.gather(*(click(crowd, run, together) for run in burst))
        for run, took in zip(burst, seconds, strict=True):
            samples.setdefault(run.kind, []).append(took)
        await settle(stack, [uuid.UUID(run.run_id) for run in burst])
    return samples


async def settle(stack: LocalStack, run_ids: list[uuid.UUID]) -> None:
    async def settled() -> int:
        async with stack.pool.acquire() as conn:
            return int(await conn.fetchval(
                "SELECT count(DISTINCT run_id) FROM run_events WHERE run_id = ANY($1::uuid[]) "
                "AND type = ANY($2::text[])", run_ids, list(SETTLED)))
    deadline = time.monotonic() + 300
    while True:
        if await settled() >= len(run_ids) or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.1)


async def dbos_baseline(stack: LocalStack, approvals: int) -> Figures | None:
    """DBOS's toy, send → next step, in its own process (bench.peers_dbos)."""
    assert stack.settings.database_url is not None  # local_stack always sets it
    url = await create_database(stack.settings.database_url, "human_dbos", migrate=False)
    done = await asyncio.to_thread(subprocess.run, [
        sys.executable, "-m", "bench.peers_dbos", "--database-url", url, "--kinds", "toy",
        "--runs", "0", "--approvals", str(approvals), "--throughput-runs", "1"],
        capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        log("DBOS baseline failed (pip install -e '.[bench]'?):\n" + done.stderr[-2000:])
        return None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return Figures(**json.loads(lines[0]))


async def raw_temporal_baseline(stack: LocalStack, count: int) -> list[float]:
    queue = f"human-raw-{uuid.uuid4()}"
    bench = Bench(client=stack.temporal, pool=stack.pool, listener=None,  # type: ignore[arg-type]
                  ws_queue="", raw_queue=queue)
    async with Worker(stack.temporal, task_queue=queue, workflows=[RawGate, RawShape],
                      activities=[raw_task]):
        await raw_decisions(bench, 2)  # warm up
        return await raw_decisions(bench, count)


# --- (b) gate opened → person told -------------------------------------------------------------


class Notices(BaseModel):
    """Seconds from a gate's row to the person told, each way; the runs, still waiting."""
    hooks: list[float]
    mails: list[float]
    slack: list[float]
    runs: list[Click]


async def notices(stack: LocalStack, http: httpx.AsyncClient, receiver: Receiver,
                  inbox: Inbox, slack: SlackStub, count: int) -> Notices:
    """Runs started one after another, each told by webhook, mail and Slack."""
    hook = await http.post("/webhooks", json={"url": receiver.url, "events": ["gate.opened"]})
    assert hook.status_code == 201, hook.text
    contact = await http.put("/me/contact", json={"email": ADDRESS})
    assert contact.status_code == 200, contact.text
    told = Notices(hooks=[], mails=[], slack=[], runs=[])
    for _ in range(count):
        heard, mailed = len(receiver.arrivals), len(inbox.arrivals)
        run = await start(http, "validation", OWNER)
        await wait_for(lambda h=heard, m=mailed, r=run.run_id: len(receiver.arrivals) > h
                       and len(inbox.arrivals) > m and message_of(slack, r) is not None)
        async with stack.pool.acquire() as conn:
            opened = (await conn.fetchval("SELECT created_at FROM hitl_requests WHERE run_id = "
                                          "$1::uuid", run.run_id)).timestamp()
        told.hooks.append(receiver.arrivals[heard][0] - opened)
        told.mails.append(inbox.arrivals[mailed][0] - opened)
        told.slack.append(message_of(slack, run.run_id).at - opened)  # type: ignore[union-attr]
        told.runs.append(run)
    return told


def message_of(slack: SlackStub, run_id: str) -> Message | None:
    return next((m for m in list(slack.messages.values())
                 if m.thread_ts is None and run_id in json.dumps(m.blocks)), None)


async def raw_slack_posts(slack: SlackStub, count: int) -> list[float]:
    """chat.postMessage on the stand-in from this process, one at a time: call → arrival."""
    api = SlackWebApi(SlackConfig(bot_token=TOKEN, api_url=slack.url))
    delays = []
    for _ in range(count + 3):
        sent = time.time()
        posted = await api.call("chat.postMessage", channel=SLACK_CHANNEL, text="A decision")
        delays.append(slack.messages[(SLACK_CHANNEL, posted["ts"])].at - sent)
    return delays[3:]


async def slack_clicks(http: httpx.AsyncClient, slack: SlackStub,
                       runs: list[Click]) -> list[float]:
    """The owner clicks Approve in Slack on each run's message, one at a time: seconds from
    the signed interaction to the next step's first event on the run's SSE stream."""
    person = SlackPerson(http, slack, SLACK_USER)
    linked = await person.link_to({})  # the bench's client carries the owner's token
    assert linked.status_code == 200, linked.text
    delays = []
    for run in runs:
        message = message_of(slack, run.run_id)
        assert message is not None
        async with http.stream("GET", f"/runs/{run.run_id}/events/stream") as response:
            events = sse_events(response)
            async for event in events:
                if event.event == "gate.opened":
                    break
            body = person.click_body(message, "approve")
            sent = time.perf_counter()
            clicked = await person.post(body)
            assert clicked.status_code == 200, clicked.text
            async for event in events:
                if event.id is not None and not event.event.startswith("gate."):
                    delays.append(time.perf_counter() - sent)
                    break
    return delays


async def raw_posts(receiver: Receiver, count: int) -> list[float]:
    """One POST at a time from this process to the receiver: send → arrival."""
    delays = []
    async with httpx.AsyncClient() as http:
        for _ in range(count + 3):
            heard = len(receiver.arrivals)
            sent = time.time()
            await http.post(receiver.url, content=json.dumps({"type": "gate.opened"}),
                            headers={"webhook-id": f"msg_{uuid.uuid4().hex}"})
            await wait_for(lambda h=heard: len(receiver.arrivals) > h)
            delays.append(receiver.arrivals[heard][0] - sent)
    return delays[3:]  # the first ones open the connection


async def raw_mails(inbox: Inbox, port: int, count: int) -> list[float]:
    delays = []
    for _ in range(count):
        mailed = len(inbox.arrivals)
        sent = time.time()
        await asyncio.to_thread(send_mail, f"smtp://127.0.0.1:{port}", sender="ws@example.com",
                                to=ADDRESS, subject="A decision waits", text="Decide here.")
        await wait_for(lambda m=mailed: len(inbox.arrivals) > m)
        delays.append(inbox.arrivals[mailed][0] - sent)
    return delays


# --- the report --------------------------------------------------------------------------------


def both(seconds: list[float]) -> str:
    return (f"{percentile(seconds, 50) * 1000:.1f} / {percentile(seconds, 99) * 1000:.1f} ms"
            f" (n={len(seconds)})")


def row(label: str, ours: list[float], baseline_label: str, theirs: list[float]) -> list[str]:
    ratios = " / ".join(f"{percentile(ours, p) / percentile(theirs, p):.2f}×" for p in (50, 99))
    return [label, both(ours), f"{baseline_label}: {both(theirs)}", ratios]


async def run(args: argparse.Namespace) -> None:
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    receiver, inbox, smtp_port = Receiver(), Inbox(), free_port()
    await receiver.start()
    smtp = Controller(inbox, hostname="127.0.0.1", port=smtp_port)
    smtp.start()
    # Slack's rate limits left out: every waiting run's gate is posted too.
    slack = SlackStub(per_second=1_000_000).__enter__()
    try:
        async with local_stack(backend="noop", smtp_url=f"smtp://127.0.0.1:{smtp_port}",
                               smtp_from="ws@example.com", slack_bot_token=TOKEN,
                               slack_signing_secret=SIGNING_SECRET,
                               slack_channel=SLACK_CHANNEL, slack_api_url=slack.url,
                               processes=not args.in_process) as stack, \
                contextlib.AsyncExitStack() as clients:
            crowd = {f"crowd-{n}": await clients.enter_async_context(stack.client(f"crowd-{n}"))
                     for n in range(CROWD)}
            owner = await clients.enter_async_context(stack.client(OWNER))
            kinds = (["validation"] * (args.waiting + args.clicks)
                     + ["agent"] * args.agent_clicks + ["validation"] * args.warm)
            log(f"starting {len(kinds)} runs, all to wait at a gate")
            runs = await fill(stack, crowd, kinds)
            validation = [r for r in runs if r.kind == "validation"][:args.clicks]
            agents = [r for r in runs if r.kind == "agent"]
            warm = runs[len(runs) - args.warm:]
            # Both kinds in every burst, in proportion.
            to_click = sorted(validation + agents, key=lambda r: (
                (validation.index(r) / len(validation)) if r.kind == "validation"
                else (agents.index(r) / len(agents))))
            solo, rest = to_click[:args.solo], to_click[args.solo:]
            log(f"(a) {len(solo)} clicks by one person, {len(warm)} more on runs in the "
                f"worker's cache, then {len(rest)} by {args.people} people at once, "
                f"{args.waiting} other runs waiting")
            alone = await people(stack, crowd, solo, 1)
            cached = await people(stack, crowd, warm, 1)
            clicked = await people(stack, crowd, rest, args.people)
            log("(a) baselines: DBOS in-process resume, raw Temporal Update → activity")
            dbos = await dbos_baseline(stack, args.baseline)
            raw = await raw_temporal_baseline(stack, args.baseline)
            log(f"(b) {args.notices} gates opened one after another, {args.waiting} waiting")
            told = await notices(stack, owner, receiver, inbox, slack, args.notices)
            raw_hooks = await raw_posts(receiver, args.notices)
            raw_smtp = await raw_mails(inbox, smtp_port, args.notices)
            raw_slack = await raw_slack_posts(slack, args.notices)
            log(f"(c) {args.notices} clicks in Slack, one at a time")
            in_slack = await slack_clicks(owner, slack, told.runs)
    finally:
        slack.__exit__()
        smtp.stop()
        await receiver.stop()
    print(report(args, {"one person": alone, "one person, the run in the worker's cache": cached,
                        f"{args.people} at once": clicked}, dbos, raw,
                 told, raw_hooks, raw_smtp, raw_slack, in_slack, load_before))


def report(args: argparse.Namespace, clicks: dict[str, dict[str, list[float]]],
           dbos: Figures | None, raw: list[float], told: Notices, raw_hooks: list[float],
           raw_smtp: list[float], raw_slack: list[float], in_slack: list[float],
           load_before: str) -> str:
    rows = []
    for who, clicked in clicks.items():
        for kind in ("validation", "agent"):
            ours = clicked.get(kind, [])
            if not ours:
                continue
            label = f"click → next step on the SSE stream, {kind}, {who}"
            if dbos is not None:
                theirs = [dbos.approval_p50_ms / 1000, dbos.approval_p99_ms / 1000]
                rows.append([label, both(ours),
                             f"DBOS in-process resume: {dbos.approval_p50_ms:.1f} / "
                             f"{dbos.approval_p99_ms:.1f} ms (n={args.baseline})",
                             f"{percentile(ours, 50) / theirs[0]:.2f}× / "
                             f"{percentile(ours, 99) / theirs[1]:.2f}×"])
            rows.append(row(label, ours, "raw Temporal Update → activity", raw))
    rows.append(row("gate opened → webhook received", told.hooks, "raw POST", raw_hooks))
    rows.append(row("gate opened → mail accepted (SMTP)", told.mails, "raw SMTP send",
                    raw_smtp))
    rows.append(row("gate opened → Slack message posted (stand-in)", told.slack,
                    "raw chat.postMessage", raw_slack))
    if clicks["one person"].get("validation"):
        rows.append(row("click in Slack → next step on the SSE stream, validation, one person",
                        in_slack, "the same person's click through the API",
                        clicks["one person"]["validation"]))
    table = markdown_table(["figure (p50 / p99)", "Waystation", "baseline", "ratio p50 / p99"],
                           rows, [False, True, True, True])
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{table}\n\n- {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores; "
            f"load average {load_before} at the start, {load} at the end.\n"
            f"- {args.waiting} runs waiting at a gate throughout (besides those clicked); "
            f"{args.people} people deciding at once; " + (
                "one stack in one process (API, worker, receiver, SMTP server and the people "
                "share its event loop)." if args.in_process else
                "the API and the worker each in its own process, as `waystation up` runs them; "
                "the receiver, the SMTP server and the people in the benchmark's."))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_human",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiting", type=int, default=1000,
                        help="runs waiting at a gate throughout (default 1000)")
    parser.add_argument("--people", type=int, default=20, help="people deciding at once")
    parser.add_argument("--clicks", type=int, default=100, help="validation runs clicked")
    parser.add_argument("--agent-clicks", type=int, default=40, help="agent runs clicked")
    parser.add_argument("--solo", type=int, default=15,
                        help="of the clicked runs, how many one person decides first, one at "
                             "a time (default 15)")
    parser.add_argument("--warm", type=int, default=15,
                        help="validation runs started last, still in the worker's cache, one "
                             "person decides after the first ones (default 15)")
    parser.add_argument("--notices", type=int, default=50,
                        help="gates opened one after another for the webhook, mail and "
                             "Slack, then clicked in Slack")
    parser.add_argument("--in-process", action="store_true",
                        help="run the API and the worker in this process, not as children")
    parser.add_argument("--baseline", type=int, default=50,
                        help="DBOS and raw Temporal resumes timed")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
