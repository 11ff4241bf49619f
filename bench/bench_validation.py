"""Waystation's ValidationRun against raw Temporal workflows of the same shape.

    python -m bench.bench_validation [--runs N] [--decisions N] [--concurrency N]

One process, one Temporal dev server and one embedded PostgreSQL, both started here (or
--temporal-address / DATABASE_URL). Both workers run in this process on their own task
queues; the agent backend is `noop`, so every figure is machinery, not model time.

1. Decision latency: a run waits at its first gate; time from sending the `decide` Update to
   the moment the commit of phase 1's first `task.started` event is announced on the
   `waystation_events` channel (LISTEN; the arrival time of the NOTIFY). Baseline: a workflow
   waiting on a flag set by an Update, timed until its one no-op activity starts (in-process).
2. Per-phase overhead: whole runs without gates, one at a time, wall time / 5 phases.
   Baseline: five phases of 2, 3, 2, 2, 3 no-op activities, writing nothing.
3. Throughput: waves of concurrent whole runs, runs/s (median wave). Same baseline shape.

Runs rows are inserted before each timer starts, as the API does before starting a workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import temporalio
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from bench.common import RawGate, RawShape, expect_start, markdown_table, percentile, raw_task
from bench.common import ratio as fmt_ratio
from waystation.activities.agents import backend_named
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.models import ValidationInput, ValidationRunInput
from waystation.kinds.validation.phases import PHASE_COUNT, PHASES
from waystation.kinds.validation.workflow import ValidationRun
from waystation.persistence.db import create_pool
from waystation.persistence.migrate import apply_migrations
from waystation.persistence.runs import create_run
from waystation.registry import load_registry
from waystation.temporal_client import DATA_CONVERTER, register_search_attributes
from waystation.testing import DEV_SERVER_ARGS, with_database
from waystation.worker import build_worker
from waystation.workflows import search_attributes
from waystation.workflows.gate_rules import DecisionInput

IDEA = "An app that helps small clinics schedule patients and cut no-shows."
GATE = "approve_founders_brief"
NEXT_TASK_KEY = f"p1.a1.{PHASES[1].tasks[0].task}:started"  # profile_customer_segment
SHAPE = [len(phase.tasks) for phase in PHASES]
CHANNEL = "waystation_events"


def log(message: str) -> None:
    print(f"# {message}", file=sys.stderr, flush=True)


# --- infrastructure ----------------------------------------------------------------------------


@asynccontextmanager
async def bench_database() -> AsyncIterator[str]:
    """A fresh, migrated database on DATABASE_URL's server or on an embedded one started here."""
    base = os.environ.get("DATABASE_URL")
    scratch: Path | None = None
    if base is None:
        from waystation.persistence.embedded import embedded_database_url, stop_embedded

        scratch = Path(tempfile.mkdtemp(prefix="waystation-bench-pg-"))
        log("starting embedded PostgreSQL")
        base = embedded_database_url(scratch / "pgdata")
    name = f"waystation_bench_{uuid.uuid4().hex[:10]}"
    try:
        admin = await asyncpg.connect(base)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        url = with_database(base, name)
        conn = await asyncpg.connect(url)
        try:
            await apply_migrations(conn, folders=load_registry(
                use_entry_points=False).migration_folders())
        finally:
            await conn.close()
        try:
            yield url
        finally:
            admin = await asyncpg.connect(base)
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            finally:
                await admin.close()
    finally:
        if scratch is not None:
            stop_embedded(scratch / "pgdata")
            shutil.rmtree(scratch, ignore_errors=True)


@asynccontextmanager
async def bench_temporal(address: str | None, namespace: str,
                         server_args: Sequence[str] = DEV_SERVER_ARGS) -> AsyncIterator[Client]:
    """A client of the server at `address`, or of a dev server started here with
    `server_args` (the engine's settings unless a benchmark compares them)."""
    if address is not None:
        client = await Client.connect(address, namespace=namespace,
                                      data_converter=DATA_CONVERTER)
        await register_search_attributes(client, namespace)
        yield client
        return
    log("starting Temporal dev server")
    # The server inherits our stdout and prints a banner there: point it at stderr instead,
    # so stdout carries only the table.
    sys.stdout.flush()
    saved_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        env = await WorkflowEnvironment.start_local(
            namespace=namespace,
            data_converter=DATA_CONVERTER,
            dev_server_existing_path=str(Path(sys.executable).parent / "temporal"),
            search_attributes=search_attributes.ALL,
            dev_server_extra_args=list(server_args))
    finally:
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)
    try:
        yield env.client
    finally:
        await env.shutdown()


class EventListener:
    """LISTENs on waystation_events and notes when each watched run's commits were announced."""

    def __init__(self) -> None:
        self._conn: asyncpg.Connection | None = None
        self._notes: dict[str, list[tuple[int, float]]] = {}
        self._wake: dict[str, asyncio.Event] = {}

    async def start(self, url: str) -> None:
        self._conn = await asyncpg.connect(url)
        await self._conn.add_listener(CHANNEL, self._on_notify)

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        arrived = time.perf_counter()
        note = json.loads(payload)
        run_id = note["run_id"]
        if run_id in self._notes:
            self._notes[run_id].append((int(note["seq"]), arrived))
            self._wake[run_id].set()

    def watch(self, run_id: uuid.UUID) -> None:
        self._notes[str(run_id)] = []
        self._wake[str(run_id)] = asyncio.Event()

    async def committed_at(self, pool: asyncpg.Pool, run_id: uuid.UUID, event_key: str,
                           timeout: float = 30.0) -> float:  # noqa: ASYNC109
        """When the NOTIFY of the commit that stored `event_key` arrived (perf_counter)."""
        rid = str(run_id)
        deadline = time.perf_counter() + timeout
        try:
            while True:
                self._wake[rid].clear()
                async with pool.acquire() as conn:
                    seq = await conn.fetchval(
                        "SELECT seq FROM run_events WHERE run_id = $1 AND event_key = $2",
                        run_id, event_key)
                if seq is not None:
                    hit = next((t for s, t in self._notes[rid] if s >= seq), None)
                    if hit is not None:
                        return hit
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError(f"{event_key} of run {run_id} not announced")
                await asyncio.wait_for(self._wake[rid].wait(), left)
        finally:
            self._notes.pop(rid, None)
            self._wake.pop(rid, None)


@dataclass
class Bench:
    client: Client
    pool: asyncpg.Pool
    listener: EventListener
    ws_queue: str
    raw_queue: str

    async def new_run(self, gates: list[str]) -> ValidationRunInput:
        run_id = uuid.uuid4()
        # In place: what the API settles `tasks: auto` to for the noop backend.
        run_input = ValidationInput(entrepreneur_input=IDEA, gates=gates, tasks="in_place")
        async with self.pool.acquire() as conn:
            await create_run(conn, run_id=run_id, kind="validation", owner="bench",
                             group_id=None, workflow_id=VALIDATION.workflow_id(run_id),
                             idempotency_key=None, input=run_input.model_dump(mode="json"))
        return ValidationRunInput(run_id=run_id, owner="bench", input=run_input)

    async def start_run(self, arg: ValidationRunInput) -> WorkflowHandle:
        return await self.client.start_workflow(
            ValidationRun.run, arg, id=VALIDATION.workflow_id(arg.run_id),
            task_queue=self.ws_queue)

    async def whole_run(self, arg: ValidationRunInput) -> None:
        result = await self.client.execute_workflow(
            ValidationRun.run, arg, id=VALIDATION.workflow_id(arg.run_id),
            task_queue=self.ws_queue)
        assert result.status == "completed", result

    async def raw_whole_run(self) -> None:
        done = await self.client.execute_workflow(
            RawShape.run, SHAPE, id=f"bench-raw-shape-{uuid.uuid4()}",
            task_queue=self.raw_queue)
        assert done == sum(SHAPE)


async def _until(check: Callable[[], Awaitable[bool]], what: str,
                 timeout: float = 120.0) -> None:  # noqa: ASYNC109
    deadline = time.perf_counter() + timeout
    while not await check():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


# --- 1. decision latency -----------------------------------------------------------------------


async def waystation_decisions(b: Bench, n: int) -> list[float]:
    args = [await b.new_run([GATE]) for _ in range(n)]
    handles = await asyncio.gather(*(b.start_run(a) for a in args))
    ids = [a.run_id for a in args]

    async def all_waiting() -> bool:
        async with b.pool.acquire() as conn:
            waiting = await conn.fetchval(
                "SELECT count(*) FROM runs WHERE id = ANY($1::uuid[]) AND hitl_state = $2",
                ids, GATE)
        return waiting == n

    await _until(all_waiting, f"{n} runs to wait at {GATE}")
    samples = []
    for arg, handle in zip(args, handles, strict=True):
        b.listener.watch(arg.run_id)
        sent = time.perf_counter()
        await handle.execute_update(ValidationRun.decide, DecisionInput(
            checkpoint_name=GATE, decision="approve", decided_by="bench"))
        started = await b.listener.committed_at(b.pool, arg.run_id, NEXT_TASK_KEY)
        samples.append(started - sent)
        await handle.result()  # let the run finish before the next decision
    return samples


async def raw_decisions(b: Bench, n: int) -> list[float]:
    handles = await asyncio.gather(*(
        b.client.start_workflow(RawGate.run, id=f"bench-raw-gate-{uuid.uuid4()}",
                                task_queue=b.raw_queue) for _ in range(n)))

    async def all_waiting() -> bool:
        try:
            answers = await asyncio.gather(*(h.query(RawGate.waiting) for h in handles))
        except RPCError:
            return False
        return all(answers)

    await _until(all_waiting, f"{n} raw workflows to wait for their update")
    samples = []
    for handle in handles:
        started = expect_start(handle.id)
        sent = time.perf_counter()
        await handle.execute_update(RawGate.decide, "approve")
        samples.append(await asyncio.wait_for(started, 30) - sent)
        await handle.result()
    return samples


# --- 2. per-phase overhead ---------------------------------------------------------------------


async def waystation_phase_times(b: Bench, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        arg = await b.new_run([])
        began = time.perf_counter()
        await b.whole_run(arg)
        samples.append((time.perf_counter() - began) / PHASE_COUNT)
    return samples


async def raw_phase_times(b: Bench, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        await b.raw_whole_run()
        samples.append((time.perf_counter() - began) / len(SHAPE))
    return samples


# --- 3. throughput -----------------------------------------------------------------------------


async def waystation_throughput(b: Bench, concurrency: int, waves: int) -> list[float]:
    rates = []
    for _ in range(waves):
        args = [await b.new_run([]) for _ in range(concurrency)]
        began = time.perf_counter()
        await asyncio.gather(*(b.whole_run(a) for a in args))
        rates.append(concurrency / (time.perf_counter() - began))
    return rates


async def raw_throughput(b: Bench, concurrency: int, waves: int) -> list[float]:
    rates = []
    for _ in range(waves):
        began = time.perf_counter()
        await asyncio.gather(*(b.raw_whole_run() for _ in range(concurrency)))
        rates.append(concurrency / (time.perf_counter() - began))
    return rates


# --- the report --------------------------------------------------------------------------------


async def warm_up(b: Bench) -> None:
    """First runs pay for imports, sandbox module loads and connection set-up: not measured."""
    await waystation_decisions(b, 2)
    await raw_decisions(b, 2)
    await waystation_phase_times(b, 2)
    await raw_phase_times(b, 2)
    await waystation_throughput(b, 5, 1)
    await raw_throughput(b, 5, 1)


def report(args: argparse.Namespace, results: dict[str, list[float]], pg_version: str,
           elapsed: float) -> str:
    ms = 1000.0
    w_dec, r_dec = results["ws_decide"], results["raw_decide"]
    w_phase, r_phase = results["ws_phase"], results["raw_phase"]
    w_rate, r_rate = results["ws_rate"], results["raw_rate"]
    rows = []
    for label, pct in (("p50", 50), ("p99", 99)):
        w, r = percentile(w_dec, pct) * ms, percentile(r_dec, pct) * ms
        rows.append([f"Decision → next phase's first task started, {label} (ms)",
                     f"{w:.1f}", f"{r:.1f}", fmt_ratio(w, r)])
    w, r = statistics.median(w_phase) * ms, statistics.median(r_phase) * ms
    rows.append(["Per-phase overhead, whole run / 5 phases, p50 (ms)",
                 f"{w:.1f}", f"{r:.1f}", fmt_ratio(w, r)])
    w, r = statistics.median(w_rate), statistics.median(r_rate)
    rows.append([f"Throughput, {args.concurrency} concurrent whole runs (runs/s)",
                 f"{w:.1f}", f"{r:.1f}", fmt_ratio(w, r)])
    table = markdown_table(["Measure", "Waystation", "Raw Temporal", "Ratio (W/raw)"], rows,
                           right=[False, True, True, True])
    temporal = (f"Temporal at {args.temporal_address}" if args.temporal_address
                else "Temporal dev server started here (in-memory SQLite)")
    notes = [
        f"{args.decisions} decisions; {args.runs} sequential whole runs; "
        f"{args.waves} waves of {args.concurrency} concurrent runs (median wave). "
        f"Noop agent backend; phases of {'/'.join(map(str, SHAPE))} tasks.",
        "Decision latency ends when the NOTIFY on `waystation_events` for the commit of "
        "`task.started` arrives (LISTEN); the baseline ends when its no-op activity starts.",
        f"One process, both workers in it; {temporal}; "
        f"PostgreSQL {pg_version} "
        f"({'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'embedded'}, "
        f"worker pool of {args.pool_size}); "
        f"Python {platform.python_version()}, temporalio {temporalio.__version__}, "
        f"{os.cpu_count()} CPUs. Bench took {elapsed:.0f}s.",
    ]
    return table + "\n\n" + "\n".join(f"- {n}" for n in notes)


async def run_bench(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    async with bench_database() as url, bench_temporal(args.temporal_address,
                                                       args.namespace) as client:
        pool = await create_pool(url, max_size=args.pool_size)
        listener = EventListener()
        await listener.start(url)
        try:
            pg_version = await pool.fetchval("SHOW server_version")
            b = Bench(client, pool, listener, ws_queue=f"bench-ws-{uuid.uuid4()}",
                      raw_queue=f"bench-raw-{uuid.uuid4()}")
            ws_worker = build_worker(client, pool, task_queue=b.ws_queue,
                                     backend=backend_named("noop"))
            raw_worker = Worker(client, task_queue=b.raw_queue, workflows=[RawGate, RawShape],
                                activities=[raw_task])
            async with ws_worker, raw_worker:
                log("warming up")
                await warm_up(b)
                results: dict[str, list[float]] = {}
                log(f"1/3 decision latency ({args.decisions} decisions each)")
                results["ws_decide"] = await waystation_decisions(b, args.decisions)
                results["raw_decide"] = await raw_decisions(b, args.decisions)
                log(f"2/3 per-phase overhead ({args.runs} sequential runs each)")
                results["ws_phase"] = await waystation_phase_times(b, args.runs)
                results["raw_phase"] = await raw_phase_times(b, args.runs)
                log(f"3/3 throughput ({args.waves} waves of {args.concurrency} runs each)")
                results["ws_rate"] = await waystation_throughput(b, args.concurrency,
                                                                 args.waves)
                results["raw_rate"] = await raw_throughput(b, args.concurrency, args.waves)
        finally:
            await listener.close()
            await pool.close()
    print(report(args, results, pg_version, time.perf_counter() - began))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_validation",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=50,
                        help="gate decisions timed, per side (default 50)")
    parser.add_argument("--runs", type=int, default=30,
                        help="sequential whole runs timed, per side (default 30)")
    parser.add_argument("--concurrency", type=int, default=20,
                        help="concurrent whole runs per throughput wave (default 20)")
    parser.add_argument("--waves", type=int, default=3,
                        help="throughput waves, per side; the median is shown (default 3)")
    parser.add_argument("--pool-size", type=int, default=10,
                        help="Postgres pool size of the Waystation worker (default 10, as "
                             "`waystation worker`)")
    parser.add_argument("--temporal-address", default=None,
                        help="use this Temporal server instead of starting a dev server")
    parser.add_argument("--namespace", default="default")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run_bench(args))


if __name__ == "__main__":
    main()
