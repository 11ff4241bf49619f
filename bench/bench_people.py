"""People around a run: the decision inbox of a member of many groups, and webhook delivery.

    python -m bench.bench_people inbox [--groups 100] [--pending 10000]
    python -m bench.bench_people webhooks [--hooks 20] [--runs 50] [--latency-runs 30]

`inbox`: a private embedded PostgreSQL holds `--pending` pending requests; a member of
`--groups` groups (approver) sees a fifth of them, on its groups' runs; beside it, a user in no
group owning as many runs (the query before groups existed). Both are timed as the bare SQL and
as `GET /decisions` through the API (ASGI, no network).

`webhooks`: a whole local stack (Postgres, Temporal dev server, worker, API) and a local
receiver (uvicorn). Latency: one webhook, runs started one after another; the delay from a
request's row being written to its `gate.opened` delivery arriving. Throughput: `--runs` runs
wait at a gate (the latency runs among them), `--hooks` webhooks want `gate.decided`, every
gate is rejected at once (each run then fails: no further work competes):
deliveries per second; beside it, the same signed POSTs sent by one process straight to the
receiver, 20 at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import uvicorn
from standardwebhooks import Webhook

from bench.bench_metrics import dead_address
from bench.common import latency_summary
from waystation.api.app import create_app
from waystation.api.auth import issue_token
from waystation.persistence import gates as gates_repo
from waystation.persistence.db import create_pool
from waystation.persistence.embedded import embedded_database_url, stop_embedded
from waystation.persistence.migrate import apply_migrations
from waystation.registry import load_registry
from waystation.settings import Settings
from waystation.testing import free_port, local_stack

CALLS = 200
MEMBER, LONER = "member", "loner"

# ($1 groups, $2 pending requests): the member's groups, their runs (a fifth of the pending
# requests), as many runs of the loner's, and the rest owned by 1,000 other users.
FILL = [
    """INSERT INTO groups (id, name, created_by)
       SELECT gen_random_uuid(), 'group ' || g, 'someone' FROM generate_series(1, $1::int) g""",
    """INSERT INTO group_members (group_id, user_name, role, added_by)
       SELECT id, 'member', 'approver', 'someone' FROM groups""",
    """INSERT INTO group_members (group_id, user_name, role, added_by)
       SELECT id, 'someone', 'owner', 'someone' FROM groups""",
    """INSERT INTO runs (id, kind, owner, group_id, workflow_id, status, hitl_state)
       SELECT gen_random_uuid(), 'validation', 'someone',
              (SELECT id FROM groups ORDER BY id OFFSET (g % $1::int) LIMIT 1),
              'grouped-' || g, 'paused', 'approve_founders_brief'
         FROM generate_series(1, $2::int / 5) g""",
    """INSERT INTO runs (id, kind, owner, workflow_id, status, hitl_state)
       SELECT gen_random_uuid(), 'validation', 'loner', 'loner-' || g, 'paused',
              'approve_founders_brief'
         FROM generate_series(1, $2::int / 5) g""",
    """INSERT INTO runs (id, kind, owner, workflow_id, status, hitl_state)
       SELECT gen_random_uuid(), 'validation', 'user' || (g % 1000), 'other-' || g, 'paused',
              'approve_founders_brief'
         FROM generate_series(1, $2::int - 2 * ($2::int / 5)) g""",
    """INSERT INTO hitl_requests (id, run_id, checkpoint_name, phase, title, description,
                                 digest, created_at)
       SELECT gen_random_uuid(), id, 'approve_founders_brief', 0, 't', 'd', md5(id::text),
              now() - random() * interval '7 days'
         FROM runs""",
]


async def timed(call: Any, n: int = CALLS) -> list[float]:
    await call()  # warm: plans, connections
    times = []
    for _ in range(n):
        began = time.perf_counter()
        await call()
        times.append(time.perf_counter() - began)
    return times


async def bench_inbox(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ws-bench-people-"))
    try:
        url = await asyncio.to_thread(embedded_database_url, folder / "pgdata")
        conn = await asyncpg.connect(url)
        try:
            await apply_migrations(conn, folders=load_registry(
                use_entry_points=False).migration_folders())
            async with conn.transaction():
                for statement in FILL:
                    used = [n for n in (1, 2) if f"${n}" in statement]
                    values = {1: args.groups, 2: args.pending}
                    text = statement
                    if used == [2]:
                        text = text.replace("$2", "$1")
                    await conn.execute(text, *(values[n] for n in used))
            await conn.execute("ANALYZE")
            counts = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM hitl_requests WHERE status = 'pending') AS pending,"
                " (SELECT count(*) FROM group_members WHERE user_name = 'member') AS groups")
            print(f"filled: {dict(counts)}", flush=True)
        finally:
            await conn.close()
        rows: dict[str, list[float]] = {}
        pool = await create_pool(url, max_size=1)  # the API's codecs (jsonb as objects)
        try:
            async with pool.acquire() as pooled:
                for user in (MEMBER, LONER):
                    seen = await gates_repo.list_inbox(pooled, owner=user, status="pending",
                                                       limit=100)
                    assert len(seen) == 100, (user, len(seen))
                    rows[user] = await timed(lambda u=user, c=pooled: gates_repo.list_inbox(
                        c, owner=u, status="pending", limit=100))
        finally:
            await pool.close()
        settings = Settings(database_url=url, temporal_address=dead_address())
        app = create_app(settings)
        api: dict[str, list[float]] = {}
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                for user in (MEMBER, LONER):
                    headers = {"Authorization": f"Bearer "
                                                f"{issue_token(settings.jwt_secret, user)}"}
                    api[user] = await timed(lambda h=headers: http.get("/decisions", headers=h))
        for user, label in ((MEMBER, f"member of {args.groups} groups"),
                            (LONER, "user in no group (baseline)")):
            print(f"inbox of a {label:<30} SQL {latency_summary(rows[user])} | "
                  f"GET /decisions {latency_summary(api[user])}")
        print(f"ratio member / baseline, p50: SQL "
              f"{statistics.median(rows[MEMBER]) / statistics.median(rows[LONER]):.2f}x, API "
              f"{statistics.median(api[MEMBER]) / statistics.median(api[LONER]):.2f}x")
    finally:
        await asyncio.to_thread(stop_embedded, folder / "pgdata")
        shutil.rmtree(folder, ignore_errors=True)


class Receiver:
    """A local webhook receiver under uvicorn: arrival wall time of each delivery."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, dict[str, Any], str]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.arrivals.append((time.time(), json.loads(body), headers.get("webhook-id", "")))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def start(self) -> None:
        config = uvicorn.Config(self, host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:  # noqa: ASYNC110 - uvicorn offers no event for it
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self._server.should_exit = True
        await self._task


async def wait_for(check: Any, timeout: float = 120.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("deliveries did not arrive in time")
        await asyncio.sleep(0.01)


async def gate_times(pool: asyncpg.Pool) -> dict[str, float]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, created_at FROM hitl_requests")
    return {str(r["id"]): r["created_at"].timestamp() for r in rows}


async def start_run(http: httpx.AsyncClient, **fields: Any) -> None:
    response = await http.post("/runs", json={"kind": "validation", "input": {
        "entrepreneur_input": "Coffee subscriptions for small offices, delivered weekly.",
        "gates": ["approve_founders_brief"], **fields}})
    assert response.status_code == 201, response.text


async def bench_webhooks(args: argparse.Namespace) -> None:
    receiver = Receiver()
    await receiver.start()
    try:
        async with local_stack() as stack, stack.client("bench") as http:
            hook = await http.post("/webhooks", json={"url": receiver.url,
                                                      "events": ["gate.opened"]})
            assert hook.status_code == 201, hook.text
            for _ in range(args.latency_runs):
                await start_run(http, max_phase_retries=0)
                expected = len(receiver.arrivals) + 1
                await wait_for(lambda e=expected: len(receiver.arrivals) >= e)
            created = await gate_times(stack.pool)
            delays = [arrived - created[p["data"]["request_id"]]
                      for arrived, p, _ in receiver.arrivals]
            print(f"gate opened -> its delivery received, {len(delays)} gates, one webhook: "
                  f"{latency_summary(delays)}", flush=True)

            # Throughput: the runs wait at their gate first, then every gate is decided at
            # once, so the deliveries do not compete with the runs' own work.
            ids_before = len(receiver.arrivals)
            await asyncio.gather(*(start_run(http, max_phase_retries=0)
                                   for _ in range(args.runs - args.latency_runs)))
            await wait_for(lambda: len(receiver.arrivals) >= ids_before + args.runs
                           - args.latency_runs)
            for _ in range(args.hooks):
                await http.post("/webhooks", json={"url": receiver.url,
                                                   "events": ["gate.decided"]})
            async with stack.pool.acquire() as conn:
                waiting = await conn.fetch("SELECT run_id FROM hitl_requests "
                                           "WHERE status = 'pending'")
            first = len(receiver.arrivals)
            began = time.time()
            await asyncio.gather(*(http.post(
                f"/runs/{r['run_id']}/decisions/approve_founders_brief",
                json={"decision": "reject"}) for r in waiting))
            total = args.hooks * len(waiting)
            def decided_batch() -> list[tuple[float, dict[str, Any], str]]:
                return [a for a in receiver.arrivals[first:] if a[1]["type"] == "gate.decided"]
            await wait_for(lambda: len(decided_batch()) >= total, timeout=600)
            batch = decided_batch()
            span = max(a for a, _, _ in batch) - began
            ids = {i for _, _, i in batch}
            async with stack.pool.acquire() as conn:
                decided = {str(r["id"]): r["decision_at"].timestamp() for r in await conn.fetch(
                    "SELECT id, decision_at FROM hitl_requests WHERE decision_at IS NOT NULL")}
            load_delays = [a - decided[p["data"]["request_id"]] for a, p, _ in batch]
            print(f"{args.hooks} webhooks x {len(waiting)} gates decided at once: {total} "
                  f"deliveries ({len(ids)} distinct ids) in {span:.2f} s = {total / span:.1f}/s;"
                  f" decision -> delivery {latency_summary(load_delays)}", flush=True)
            rate = await raw_baseline(receiver, total)
            print(f"baseline: the same {total} signed POSTs straight to the receiver, 20 at a "
                  f"time: {rate:.1f}/s; ratio {total / span / rate:.2f}x")
    finally:
        await receiver.stop()


async def raw_baseline(receiver: Receiver, total: int) -> float:
    secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = json.dumps({"type": "gate.opened", "timestamp": datetime.now(UTC).isoformat(),
                       "data": {"request_id": str(uuid.uuid4())}})
    limit = asyncio.Semaphore(20)

    async def post(http: httpx.AsyncClient) -> None:
        async with limit:
            msg_id, now = f"msg_{uuid.uuid4().hex}", datetime.now(UTC)
            await http.post(receiver.url, content=body, headers={
                "webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": Webhook(secret).sign(msg_id, now, body)})
    async with httpx.AsyncClient() as http:
        began = time.perf_counter()
        await asyncio.gather(*(post(http) for _ in range(total)))
        return total / (time.perf_counter() - began)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["inbox", "webhooks"])
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--hooks", type=int, default=20)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--latency-runs", type=int, default=30)
    parsed = parser.parse_args()
    asyncio.run(bench_inbox(parsed) if parsed.part == "inbox" else bench_webhooks(parsed))
