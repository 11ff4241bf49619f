"""Many runs parked at a gate: worker memory, and how fast a decided run resumes.

    python -m bench.bench_waiting [--runs 10000] [--decisions 20] [--concurrency 100]

One Temporal dev server and one embedded PostgreSQL started here (or --temporal-address /
DATABASE_URL); the worker is a separate `python -m waystation worker` process with the default
workflow cache (WAYSTATION_WORKER_MAX_CACHED_WORKFLOWS unset: 1000), so its resident memory
(RSS, psutil) is the worker's alone. Agent backend `noop`: every figure is machinery.

1. Worker RSS: idle (polling, no run yet), after a warm-up of a few runs, with all runs waiting
   at their first gate, and after the timed decisions.
2. Decision latency: from sending the `decide` Update to the arrival of the NOTIFY announcing
   the commit of phase 1's first `task.started` event. Baseline: the same, deciding runs that
   waited among only a handful (still in the worker's cache), before the mass of runs is
   started; the measured case decides random runs among the whole crowd, most of them evicted
   from the cache long ago, so each decision replays the run's history first.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import psutil
import temporalio
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowHandle

from bench.bench_validation import EventListener, bench_database, bench_temporal
from bench.common import markdown_table, percentile
from waystation.kinds.validation.kind import VALIDATION
from waystation.kinds.validation.models import ValidationInput, ValidationRunInput
from waystation.kinds.validation.phases import PHASES
from waystation.kinds.validation.workflow import ValidationRun
from waystation.persistence.db import create_pool
from waystation.persistence.runs import create_run
from waystation.workflows.gate_rules import DecisionInput

IDEA = "An app that helps small clinics schedule patients and cut no-shows."
GATE = "approve_founders_brief"
NEXT_TASK_KEY = f"p1.a1.{PHASES[1].tasks[0].task}:started"
ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024


def log(message: str) -> None:
    print(f"# {message}", file=sys.stderr, flush=True)


class WorkerProcess:
    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        with log_path.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "waystation", "worker"],
                                         cwd=ROOT, env=env, stdout=out,
                                         stderr=subprocess.STDOUT)
        self.ps = psutil.Process(self.proc.pid)
        self.log_path = log_path

    def rss_mb(self) -> float:
        assert self.proc.poll() is None, self.log_path.read_text()[-3000:]
        return self.ps.memory_info().rss / MB

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Crowd:
    def __init__(self, client: Client, pool: asyncpg.Pool, task_queue: str) -> None:
        self.client, self.pool, self.task_queue = client, pool, task_queue
        self.ids: list[uuid.UUID] = []

    async def start(self, n: int, concurrency: int) -> list[tuple[uuid.UUID, WorkflowHandle]]:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> tuple[uuid.UUID, WorkflowHandle]:
            async with gate:
                run_id = uuid.uuid4()
                run_input = ValidationInput(entrepreneur_input=IDEA, gates=[GATE])
                async with self.pool.acquire() as conn:
                    await create_run(conn, run_id=run_id, kind="validation", owner="bench",
                                     group_id=None, workflow_id=VALIDATION.workflow_id(run_id),
                                     idempotency_key=None,
                                     input=run_input.model_dump(mode="json"))
                handle = await self.client.start_workflow(
                    ValidationRun.run, ValidationRunInput(run_id=run_id, owner="bench",
                                                          input=run_input),
                    id=VALIDATION.workflow_id(run_id), task_queue=self.task_queue)
                return run_id, handle

        runs = list(await asyncio.gather(*(one() for _ in range(n))))
        self.ids = [run_id for run_id, _ in runs]
        return runs

    async def waiting(self) -> int:
        return await self.pool.fetchval(
            "SELECT count(*) FROM runs WHERE owner = 'bench' AND hitl_state = $1", GATE)

    async def statuses(self) -> dict[str, int]:
        """The runs started by the last `start` call, by status ('waiting': at the gate)."""
        rows = await self.pool.fetch(
            "SELECT CASE WHEN hitl_state = $1 THEN 'waiting' ELSE status END AS s, count(*) "
            "FROM runs WHERE id = ANY($2::uuid[]) GROUP BY 1", GATE, self.ids)
        return {r["s"]: r["count"] for r in rows}

    async def until_waiting(self, n: int, timeout: float, worker: WorkerProcess) -> float:  # noqa: ASYNC109
        """Until every run waits at the gate (or has ended otherwise, which is reported)."""
        began = time.perf_counter()
        last_report = last_change = began
        last_counts: dict[str, int] = {}
        while True:
            counts = await self.statuses()
            settled = counts.get("waiting", 0) + sum(
                v for k, v in counts.items() if k in ("completed", "failed", "canceled"))
            if settled >= n:
                break
            worker.rss_mb()  # fails loudly if the worker died
            now = time.perf_counter()
            if counts != last_counts:
                last_counts, last_change = counts, now
            elif now - last_change > 180:
                log(f"  no progress for 180s; going on with {counts}")
                break
            if now - began > timeout:
                raise TimeoutError(f"not all of {n} runs reached {GATE} in {timeout:.0f}s: "
                                   f"{counts}")
            if now - last_report > 15:
                log(f"  {counts} ({counts.get('waiting', 0) / (now - began):.1f}/s), "
                    f"worker RSS {worker.rss_mb():.0f} MB")
                last_report = now
            await asyncio.sleep(0.5)
        if counts.get("waiting", 0) < n:
            failures = await self.pool.fetch(
                "SELECT error_message, count(*) FROM runs WHERE id = ANY($1::uuid[]) AND "
                "status = 'failed' GROUP BY 1 ORDER BY 2 DESC LIMIT 3", self.ids)
            log(f"  not every run is waiting: {counts}; failures: "
                f"{[(r['error_message'], r['count']) for r in failures]}")
        return time.perf_counter() - began

    async def decide(self, listener: EventListener,
                     runs: list[tuple[uuid.UUID, WorkflowHandle]]) -> list[float]:
        samples = []
        for run_id, handle in runs:
            listener.watch(run_id)
            sent = time.perf_counter()
            await handle.execute_update(ValidationRun.decide, DecisionInput(
                checkpoint_name=GATE, decision="approve", decided_by="bench"))
            committed = await listener.committed_at(self.pool, run_id, NEXT_TASK_KEY)
            samples.append(committed - sent)
            await handle.result()  # let it finish before the next one is timed
        return samples


async def run_bench(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="waystation-bench-waiting-"))
    async with bench_database() as url, bench_temporal(args.temporal_address,
                                                       args.namespace) as client:
        pool = await create_pool(url, max_size=20)
        listener = EventListener()
        await listener.start(url)
        task_queue = f"bench-waiting-{uuid.uuid4()}"
        env = {k: v for k, v in os.environ.items()
               if k != "WAYSTATION_WORKER_MAX_CACHED_WORKFLOWS"}
        env.update(TEMPORAL_ADDRESS=client.service_client.config.target_host,
                   TEMPORAL_NAMESPACE=client.namespace, TEMPORAL_TASK_QUEUE=task_queue,
                   DATABASE_URL=url, WAYSTATION_AGENT_BACKEND="noop",
                   WAYSTATION_OTEL_EXPORTER="none", WAYSTATION_DATA_DIR=str(scratch))
        worker = WorkerProcess(env, scratch / "worker.log")
        crowd = Crowd(client, pool, task_queue)
        rss: dict[str, float] = {}
        try:
            pg_version = await pool.fetchval("SHOW server_version")
            await _until_polling(client, task_queue, worker)
            await asyncio.sleep(args.settle)
            rss["idle worker (started, polling, no run)"] = worker.rss_mb()

            log(f"warm-up and baseline: {args.decisions} runs waiting, decided one by one")
            few = await crowd.start(args.decisions, args.concurrency)
            await crowd.until_waiting(len(few), 120, worker)
            rss[f"{len(few)} runs waiting (after warm-up)"] = worker.rss_mb()
            baseline = await crowd.decide(listener, few)
            rss[f"after deciding those {len(few)} (all finished)"] = worker.rss_mb()

            log(f"starting {args.runs} runs that wait at {GATE}")
            t0 = time.perf_counter()
            crowd_runs = await crowd.start(args.runs, args.concurrency)
            started_s = time.perf_counter() - t0
            parked_s = await crowd.until_waiting(args.runs, args.timeout, worker)
            await asyncio.sleep(args.settle)
            rss[f"{args.runs} runs waiting at a gate"] = worker.rss_mb()

            log(f"deciding {args.decisions} random runs of the {args.runs}")
            waiting = {r["id"] for r in await pool.fetch(
                "SELECT id FROM runs WHERE owner = 'bench' AND hitl_state = $1", GATE)}
            ended = args.runs - len(waiting & {run_id for run_id, _ in crowd_runs})
            chosen = random.Random(7).sample(
                [r for r in crowd_runs if r[0] in waiting], args.decisions)
            measured = await crowd.decide(listener, chosen)
            rss[f"after deciding {args.decisions} of them"] = worker.rss_mb()
            peak = _peak_rss_mb(worker)
        finally:
            worker.stop()
            await listener.close()
            await pool.close()
            shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.perf_counter() - began
    print(report(args, rss, peak, baseline, measured, started_s, parked_s, pg_version, elapsed,
                 ended))


async def _until_polling(client: Client, task_queue: str, worker: WorkerProcess) -> None:
    """Until the worker process polls its workflow task queue (imports done, connected)."""
    request = DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW)
    deadline = time.perf_counter() + 120
    while not (await client.workflow_service.describe_task_queue(request)).pollers:
        worker.rss_mb()
        if time.perf_counter() > deadline:
            raise TimeoutError("the worker never polled its task queue")
        await asyncio.sleep(0.2)


def _peak_rss_mb(worker: WorkerProcess) -> float | None:
    """VmHWM: the worker's high-water mark of resident memory (Linux only)."""
    try:
        status = Path(f"/proc/{worker.proc.pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def report(args: argparse.Namespace, rss: dict[str, float], peak: float | None,
           baseline: list[float], measured: list[float], started_s: float, parked_s: float,
           pg_version: str, elapsed: float, ended: int) -> str:
    ms = 1000.0
    idle = next(iter(rss.values()))
    rows = [[f"Worker RSS: {label} (MB)", f"{value:.0f}", f"{value - idle:+.0f}"]
            for label, value in rss.items()]
    if peak is not None:
        rows.append(["Worker RSS high-water mark (MB)", f"{peak:.0f}", f"{peak - idle:+.0f}"])
    table1 = markdown_table(["Memory", "RSS", "vs idle"], rows, right=[False, True, True])
    lat_rows = []
    for label, pct in (("p50", 50), ("p90", 90), ("max", 100)):
        w, b = percentile(measured, pct) * ms, percentile(baseline, pct) * ms
        lat_rows.append([f"Decision → next task.started committed, {label} (ms)",
                         f"{w:.1f}", f"{b:.1f}"])
    table2 = markdown_table(
        ["Latency", f"among {args.runs} waiting", f"among {args.decisions} (cached)"],
        lat_rows, right=[False, True, True])
    temporal = (f"Temporal at {args.temporal_address}" if args.temporal_address
                else "Temporal dev server started here (in-memory SQLite)")
    notes = [
        f"{args.runs} validation runs started in {started_s:.0f}s; "
        f"{args.runs - ended} waiting at {GATE} after {parked_s:.0f}s "
        f"({(args.runs - ended) / parked_s:.1f} runs/s reached the gate)"
        + (f"; {ended} did not reach it (see the log)." if ended else "."),
        f"{args.decisions} decisions timed per column; the worker's cache holds 1000 "
        "workflows (default)" + (", so the chosen runs were mostly evicted and replay first."
                                 if args.runs > 1000 else "."),
        f"Worker: `python -m waystation worker` (separate process, noop backend); {temporal}; "
        f"PostgreSQL {pg_version} "
        f"({'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'embedded'}); "
        f"Python {platform.python_version()}, temporalio {temporalio.__version__}, "
        f"{os.cpu_count()} CPUs. Bench took {elapsed:.0f}s.",
    ]
    return table1 + "\n\n" + table2 + "\n\n" + "\n".join(f"- {n}" for n in notes)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_waiting",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000,
                        help="runs parked at the gate (default 10000)")
    parser.add_argument("--decisions", type=int, default=20,
                        help="decisions timed, per column (default 20)")
    parser.add_argument("--concurrency", type=int, default=100,
                        help="runs being started at once (default 100)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds allowed for all runs to reach the gate (default 1800)")
    parser.add_argument("--settle", type=float, default=3.0,
                        help="seconds to wait before reading an RSS figure (default 3)")
    parser.add_argument("--temporal-address", default=None,
                        help="use this Temporal server instead of starting a dev server")
    parser.add_argument("--namespace", default="default")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run_bench(args))


if __name__ == "__main__":
    main()
