"""The web console in headless chromium: how fast the inbox becomes interactive with 1,000
pending decisions (beside the same page with an empty inbox), and whether a run page keeps up
with a run writing 200 events/s (beside the same page on an idle run).

    .venv/bin/python -m bench.bench_console

The API runs as its own process (`waystation api`) on a fresh database; decisions and events
are written to the read model exactly as workflows write them (waystation.persistence.writes), so
the figures are the console's and the API's, not Temporal's. Needs /usr/bin/chromium
(scripts/install-system-packages).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx
from playwright.async_api import Browser, Page, async_playwright

from bench.bench_validation import bench_database, log
from bench.common import markdown_table, percentile
from waystation.api.auth import issue_login_code
from waystation.persistence.db import create_pool
from waystation.persistence.models import GateOption
from waystation.persistence.runs import create_run
from waystation.persistence.writes import EventWrite, GateOpenWrite, ReadModelWrite, apply_write
from waystation.testing import free_port

SECRET = "bench-console-secret-0123456789-0123456789"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
# Records, in the page, when each new last-seq was shown (epoch ms), for lag measurements.
WATCH_SEQ = """() => {
  window.__shown = [];
  new MutationObserver(() => window.__shown.push(
      [Number(document.body.dataset.lastSeq || 0), performance.timeOrigin + performance.now()]))
    .observe(document.body, {attributes: true, attributeFilter: ["data-last-seq"]});
}"""


@asynccontextmanager
async def api_process(url: str) -> AsyncIterator[str]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": url, "WAYSTATION_API_PORT": str(port),
           "WAYSTATION_JWT_SECRET": SECRET, "WAYSTATION_ENV": "dev",
           "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}", "WAYSTATION_OTEL_EXPORTER": "none"}
    proc = subprocess.Popen([sys.executable, "-m", "waystation", "api"], env=env,  # noqa: ASYNC220
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(300):
                try:
                    if (await http.get(base + "/")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def new_run(pool: asyncpg.Pool, owner: str, kind: str = "validation") -> uuid.UUID:
    run_id = uuid.uuid4()
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind=kind, owner=owner, group_id=None,
                         workflow_id=f"bench-{run_id}", idempotency_key=None,
                         input={"entrepreneur_input": f"Bench idea {run_id}"})
    return run_id


async def seed_decisions(pool: asyncpg.Pool, owner: str, count: int, per_run: int = 10) -> None:
    """`count` pending requests, `per_run` on each run, with a context like a real brief."""
    context = {"phase": 1, "phase_name": "vpc_discovery", "fit_assessment": {
        "fit_score": 61, "segment": "freelance designers", "gaps": ["pricing untested"]},
        "evidence": [{"source": "interviews", "people": 12}, {"source": "survey", "people": 40}]}
    for start in range(0, count, per_run):
        run_id = await new_run(pool, owner)
        writes = []
        for i in range(start, min(count, start + per_run)):
            writes.append(GateOpenWrite(
                id=uuid.uuid4(), checkpoint_name=f"review_{i}", phase=1,
                title=f"Review item {i}", description="Approve the value proposition canvas.",
                context=context, recommended_option="approve",
                options=[GateOption(value="approve", label="Approve"),
                         GateOption(value="reject", label="Reject")],
                digest=hashlib.sha256(str(i).encode()).hexdigest()))
        async with pool.acquire() as conn:
            for gate in writes:
                await apply_write(conn, ReadModelWrite(run_id=run_id, open_gate=gate))


async def signed_in(browser: Browser, pool: asyncpg.Pool, base: str, user: str) -> Page:
    async with pool.acquire() as conn:
        code = await issue_login_code(conn, user, ttl_seconds=600)
    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    await page.goto(f"{base}/console/login?code={code}")
    await page.wait_for_selector("body[data-inbox-ready]", timeout=60_000)
    return page


async def inbox_ready_ms(page: Page) -> tuple[float, float, int]:
    """Navigation start → (the newest requests on screen with their buttons, every open
    request drawn); the page draws the rest in slices, answering input between them."""
    await page.reload()
    await page.wait_for_selector("body[data-inbox-ready]", timeout=60_000)
    ready = await page.evaluate("window.__console.inboxReady")
    count = int((await page.locator("#inbox-count").inner_text()).split()[0])
    deadline = time.monotonic() + 60
    while await page.locator("article.decision").count() < count:
        if time.monotonic() > deadline:
            raise TimeoutError("the inbox did not draw every request")
        await asyncio.sleep(0.05)
    complete = await page.evaluate("window.__console.inboxComplete || window.__console.inboxReady")
    return ready, complete, count


async def bench_inbox(browser: Browser, pool: asyncpg.Pool, base: str, reps: int,
                      count: int) -> list[list[str]]:
    await seed_decisions(pool, "full", count)
    rows = []
    results = {}
    for user in ("empty", "full"):
        page = await signed_in(browser, pool, base, user)
        ready, complete, cards = [], [], 0
        for _ in range(reps):
            first, whole, cards = await inbox_ready_ms(page)
            ready.append(first)
            complete.append(whole)
        await page.context.close()
        results[user] = (ready, complete, cards)
        log(f"inbox {user}: {cards} cards, median {statistics.median(ready):.0f} ms")
    (ready, complete, cards), (empty, _, _) = results["full"], results["empty"]

    def fmt(samples: list[float]) -> str:
        return f"{statistics.median(samples):.0f} / {max(samples):.0f} ms"
    rows.append([f"inbox interactive (newest on screen, buttons live), {cards:,} pending "
                 f"(median / max of {reps})", fmt(ready), f"empty inbox {fmt(empty)}",
                 f"{statistics.median(ready) / statistics.median(empty):.2f}x"])
    rows.append([f"inbox: all {cards:,} cards drawn", fmt(complete), f"empty inbox {fmt(empty)}",
                 f"{statistics.median(complete) / statistics.median(empty):.2f}x"])
    return rows


async def write_events(pool: asyncpg.Pool, run_id: uuid.UUID, first_seq: int, count: int,
                       per_second: float, batch: int) -> dict[int, float]:
    """Append `count` task events at `per_second`, `batch` per transaction; seq → commit time."""
    committed: dict[int, float] = {}
    interval = batch / per_second
    start = time.perf_counter()
    seq = first_seq
    for n in range(0, count, batch):
        target = start + (n // batch) * interval
        await asyncio.sleep(max(0.0, target - time.perf_counter()))
        events = [EventWrite(event_key=f"e{seq + i}", type="task.in_progress", phase=1,
                             crew="discovery", task=f"task_{(seq + i) % 7}", agent="bench",
                             status="in_progress", progress_pct=min(99, (seq + i) // 50),
                             output={"task_pct": (seq + i) % 100, "note": "thinking"})
                  for i in range(min(batch, count - n))]
        async with pool.acquire() as conn:
            await apply_write(conn, ReadModelWrite(run_id=run_id, events=events))
        now = time.time() * 1000
        for _ in events:
            committed[seq] = now
            seq += 1
    return committed


async def lags(page: Page, committed: dict[int, float]) -> list[float]:
    """For each written seq, commit → the page first showing it (or a later one)."""
    last = max(committed)
    # Polled with evaluate: the page's CSP refuses the string eval of wait_for_function.
    deadline = time.monotonic() + 60
    while int(await page.evaluate("document.body.dataset.lastSeq || 0")) < last:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page did not show seq {last} within 60 s")
        await asyncio.sleep(0.05)
    shown = await page.evaluate("window.__shown")
    out = []
    for seq, at in committed.items():
        when = next(t for s, t in shown if s >= seq)
        out.append(when - at)
    return out


async def bench_run_page(browser: Browser, pool: asyncpg.Pool, base: str, rate: float,
                         seconds: float) -> list[list[str]]:
    # A kind no console code knows: the generic run page follows it.
    run_id = await new_run(pool, "runner", kind="bench_kind")
    page = await signed_in(browser, pool, base, "runner")
    await page.goto(f"{base}/#/runs/{run_id}")
    await page.wait_for_selector("table.events")
    await page.evaluate(WATCH_SEQ)
    # Idle: one event now and then.
    idle: dict[int, float] = {}
    for i in range(20):
        idle |= await write_events(pool, run_id, 1 + i, 1, 1.0, 1)
        await asyncio.sleep(0.2)
    idle_lags = await lags(page, idle)
    busy_count = int(rate * seconds)
    busy = await write_events(pool, run_id, 21, busy_count, rate, max(1, int(rate // 50)))
    busy_lags = await lags(page, busy)
    rendered = int(await page.evaluate("document.body.dataset.lastSeq"))
    await page.context.close()
    log(f"run page: {rendered} events shown")

    def fmt(samples: list[float]) -> str:
        return (f"p50 {percentile(samples, 50):.0f} / p99 {percentile(samples, 99):.0f} / "
                f"max {max(samples):.0f} ms")
    return [[f"run page: commit → shown, {rate:.0f} events/s for {seconds:.0f} s "
             f"({busy_count:,} events, all shown in order)", fmt(busy_lags),
             f"idle run (1 event / 0.2 s): {fmt(idle_lags)}",
             f"{percentile(busy_lags, 50) / percentile(idle_lags, 50):.2f}x p50"]]


async def main(args: argparse.Namespace) -> None:
    async with bench_database() as url, api_process(url) as base:
        pool = await create_pool(url, max_size=4)
        try:
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                                           args=CHROMIUM_ARGS)
                rows = await bench_inbox(browser, pool, base, args.reps, args.decisions)
                rows += await bench_run_page(browser, pool, base, args.rate, args.seconds)
                await browser.close()
        finally:
            await pool.close()
    print()
    print(markdown_table(["figure", "console", "baseline", "ratio"], rows,
                         [False, True, True, True]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rate", type=float, default=200.0, help="events per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    asyncio.run(main(parser.parse_args()))
