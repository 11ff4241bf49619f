"""MobileAgentRun throughput with the screen graph written to Postgres, beside the same loop
with persistence turned off, measured in one run.

    python -m bench.bench_mobile [--steps N] [--runs N] [--concurrent N]
                                 [--temporal-address HOST:PORT]

One process, one Temporal dev server (WAL mode) and one embedded PostgreSQL, both started
here (or --temporal-address / DATABASE_URL). Figures:

1. Steps per second of an N-step exploration (default 1,000) of the bundled shop app on the
   simulator: the workflow, the step activity (act, observe, render the screenshot, identify)
   and, for the Waystation figure, the perceptual hash, the graph, events, snapshot and
   artifacts written per step. Baseline: the same workflow and activity with `persist=False`
   (no Postgres, no artifacts, and no perceptual hash: only a stored screen has one). The
   random policy is used so neither run stops early.
2. The same, with --concurrent runs (default 4) exploring at once on the one worker, as a
   worker serving several devices does: total steps per second, both ways. One run's steps
   are serial, so the single-run figure is bound by each step's latency; concurrent runs are
   bound by the worker's CPU, which is what a deployment runs out of first.
3. Screen-identity cost per screen: parse + layout/content hash, and the perceptual hash.
4. Graph query time for an app of 5,000 screens and 20,000 edges (graph JSON and coverage).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
from temporalio.client import Client

from bench.bench_validation import bench_database, bench_temporal, log
from waystation.activities.agents import backend_named
from waystation.kinds.mobile import repository as graph_repo
from waystation.kinds.mobile.activities.identity import identify, perceptual_hash
from waystation.kinds.mobile.activities.simulator.driver import SimulatorDriver
from waystation.kinds.mobile.activities.uixml import parse_hierarchy
from waystation.kinds.mobile.kind import MOBILE
from waystation.kinds.mobile.models import MobileAgentRunInput, MobileInput
from waystation.kinds.mobile.workflow import WORKFLOW_TASK_TIMEOUT, MobileAgentRun
from waystation.persistence.db import create_pool
from waystation.persistence.runs import create_run
from waystation.worker import build_worker

APP = "com.waystation.sample.shop"
BIG_APP = "com.example.big"
TASK_QUEUE = "bench-mobile"


async def one_run(client: Client, pool: asyncpg.Pool, steps: int, persist: bool) -> float:
    run_id = uuid.uuid4()
    inp = MobileInput(app_package=APP, max_steps=steps, policy="random",
                      sensitive_actions="skip", persist=persist, seed=11)
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="mobile_agent", owner="bench", group_id=None,
                         workflow_id=MOBILE.workflow_id(run_id), idempotency_key=None,
                         input=inp.model_dump(mode="json"))
    started = time.perf_counter()
    result = await client.execute_workflow(
        MobileAgentRun.run, MobileAgentRunInput(run_id=run_id, owner="bench", input=inp),
        id=MOBILE.workflow_id(run_id), task_queue=TASK_QUEUE, task_timeout=WORKFLOW_TASK_TIMEOUT)
    elapsed = time.perf_counter() - started
    assert result.steps == steps, result
    return steps / elapsed


async def concurrent_runs(client: Client, pool: asyncpg.Pool, runs: int, steps: int,
                          persist: bool) -> float:
    """Total steps per second of `runs` explorations of `steps` steps each, all at once."""
    started = time.perf_counter()
    await asyncio.gather(*(one_run(client, pool, steps, persist) for _ in range(runs)))
    return runs * steps / (time.perf_counter() - started)


async def identity_cost(samples: int = 300) -> tuple[float, float]:
    sim = SimulatorDriver(APP)
    await sim.launch(APP)
    await sim.observe()
    obs = await sim.observe()
    started = time.perf_counter()
    for _ in range(samples):
        hierarchy = parse_hierarchy(obs.xml)
        identify(hierarchy)
    parse_ms = (time.perf_counter() - started) * 1000 / samples
    started = time.perf_counter()
    for _ in range(samples):
        perceptual_hash(obs.png, hierarchy)
    return parse_ms, (time.perf_counter() - started) * 1000 / samples


async def big_graph_queries(pool: asyncpg.Pool, repeats: int = 5) -> tuple[float, float]:
    async with pool.acquire() as conn:
        await conn.execute("""
            INSERT INTO screens (app_package, activity, layout_hash, content_hash, phash, label)
            SELECT $1, '.A' || (i % 40), md5(i::text), md5(i::text), (i * 7919)::bigint, 'S'
              FROM generate_series(1, 5000) i""", BIG_APP)
        await conn.execute("""
            INSERT INTO actions (screen_id, selector, kind, label)
            SELECT s.id, 'Button#b' || k, 'tap', 'B' || k
              FROM screens s, generate_series(1, 5) k WHERE s.app_package = $1""", BIG_APP)
        await conn.execute("""
            INSERT INTO edges (app_package, from_screen_id, action_id, to_screen_id)
            SELECT $1, a.screen_id, a.id,
                   (SELECT min(id) FROM screens WHERE app_package = $1)
                   + (a.id * 31) % 5000
              FROM actions a JOIN screens s ON s.id = a.screen_id
             WHERE s.app_package = $1 AND a.selector <> 'Button#b5'""", BIG_APP)
        n_edges = await conn.fetchval("SELECT count(*) FROM edges WHERE app_package = $1",
                                      BIG_APP)
        assert n_edges == 20_000, n_edges
        graph_ms, coverage_ms = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            await graph_repo.app_graph(conn, BIG_APP)
            graph_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await graph_repo.coverage(conn, BIG_APP)
            coverage_ms.append((time.perf_counter() - started) * 1000)
    return statistics.median(graph_ms), statistics.median(coverage_ms)


async def main(args: argparse.Namespace) -> None:
    async with bench_database() as url, bench_temporal(args.temporal_address, "default") as client:
        pool = await create_pool(url, max_size=10)
        artifacts = Path(tempfile.mkdtemp(prefix="waystation-bench-artifacts-"))
        try:
            async with build_worker(client, pool, task_queue=TASK_QUEUE,
                                    backend=backend_named("noop"), artifact_dir=artifacts):
                log("warming up")
                await one_run(client, pool, 50, True)
                with_db, without = [], []
                for i in range(args.runs):
                    log(f"round {i + 1}: {args.steps} steps with persistence, then without")
                    with_db.append(await one_run(client, pool, args.steps, True))
                    without.append(await one_run(client, pool, args.steps, False))
                together_db, together_without = [], []
                for i in range(args.runs):
                    log(f"round {i + 1}: {args.concurrent} runs of {args.steps} steps at once, "
                        "with persistence, then without")
                    together_db.append(await concurrent_runs(
                        client, pool, args.concurrent, args.steps, True))
                    together_without.append(await concurrent_runs(
                        client, pool, args.concurrent, args.steps, False))
            parse_ms, phash_ms = await identity_cost()
            graph_ms, coverage_ms = await big_graph_queries(pool)
        finally:
            await pool.close()
    one, one_off = statistics.median(with_db), statistics.median(without)
    many, many_off = statistics.median(together_db), statistics.median(together_without)
    print(f"| figure | Waystation | baseline | ratio |\n| --- | --- | --- | --- |\n"
          f"| steps/s, one {args.steps}-step exploration (median of {args.runs}) | "
          f"{one:.1f} (graph + events + snapshot + artifacts in Postgres) | "
          f"{one_off:.1f} (same loop, persistence off) | {one / one_off:.2f}x |\n"
          f"| steps/s, {args.concurrent} such explorations at once (median of {args.runs}) | "
          f"{many:.1f} | {many_off:.1f} | {many / many_off:.2f}x |\n"
          f"| identity per screen | parse + layout/content hash {parse_ms:.2f} ms; "
          f"pHash {phash_ms:.2f} ms | | |\n"
          f"| 5,000 screens / 20,000 edges | graph JSON query {graph_ms:.0f} ms; coverage "
          f"{coverage_ms:.0f} ms | | |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--temporal-address")
    asyncio.run(main(parser.parse_args()))
