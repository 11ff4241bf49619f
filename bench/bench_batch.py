"""Batch-job throughput: items/s of a one-step job with the no-op agent, beside the raw ceiling.

The raw ceiling is measured in the same run, on the same servers: a minimal workflow starting
one no-op activity per item, as many at a time (`max_workers`), continuing as new every 1,000.
The job itself runs its items in slices (one activity runs a few consecutive items in turn),
so it can beat that ceiling: the ceiling is what one activity per item would allow.
`--items 100000` is the one-off full run: wall time, peak RSS of this process (it hosts the
worker) and the largest history of any run of the job.

    python -m bench.bench_batch                 # 10,000 items, both sides
    python -m bench.bench_batch --items 100000 --no-raw
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
import uuid

import asyncpg
from temporalio.client import Client
from temporalio.worker import Worker

from bench.batch_raw import RawBatch, RawBatchInput
from bench.bench_validation import bench_database, bench_temporal, log
from bench.common import markdown_table, raw_task
from waystation.activities.agents import backend_named
from waystation.kinds.batch.activities.items import SLICE_BUDGET_SECONDS
from waystation.kinds.batch.kind import BATCH
from waystation.kinds.batch.models import BatchInput, BatchRunInput
from waystation.kinds.batch.slices import slice_size
from waystation.kinds.batch.workflow import BatchJob
from waystation.persistence.db import create_pool
from waystation.persistence.runs import create_run


async def _largest_history(client: Client, workflow_id: str) -> tuple[int, int]:
    """(runs, largest history event count) over every run of a workflow id."""
    lengths = [e.history_length async for e in
               client.list_workflows(f'WorkflowId = "{workflow_id}"')]
    return len(lengths), max(lengths, default=0)


async def waystation_job(client: Client, pool: asyncpg.Pool, queue: str, items: int,
                         workers: int, round_size: int | None = None) -> tuple[float, int, int]:
    run_id = uuid.uuid4()
    job = BatchInput(name="bench", items=[{"n": i} for i in range(items)],
                     steps=[{"name": "work", "template": "item {{ item.n }}"}],
                     max_workers=workers, max_retries=0)
    async with pool.acquire() as conn:
        await create_run(conn, run_id=run_id, kind="batch", owner="bench", group_id=None,
                         workflow_id=BATCH.workflow_id(run_id), idempotency_key=None,
                         input=job.model_dump(mode="json"))
    began = time.perf_counter()
    rounds = {} if round_size is None else {"round_size": round_size}
    handle = await client.start_workflow(
        BatchJob.run, BatchRunInput(run_id=run_id, owner="bench", spec=job.spec(), **rounds),
        id=BATCH.workflow_id(run_id), task_queue=queue)
    result = await handle.result()
    elapsed = time.perf_counter() - began
    assert result.completed == items, result
    await asyncio.sleep(1)  # visibility catches up with the last run
    runs, largest = await _largest_history(client, handle.id)
    return elapsed, runs, largest


async def raw_job(client: Client, queue: str, items: int, workers: int) -> float:
    began = time.perf_counter()
    await client.execute_workflow(RawBatch.run, RawBatchInput(items, workers, 1000),
                                  id=f"bench-raw-batch-{uuid.uuid4()}", task_queue=queue)
    return time.perf_counter() - began


async def run_bench(args: argparse.Namespace) -> None:
    async with bench_database() as url, bench_temporal(None, "default") as client:
        pool = await create_pool(url, max_size=args.workers + 4)
        ws_queue, raw_queue = f"bench-batch-{uuid.uuid4()}", f"bench-raw-{uuid.uuid4()}"
        from waystation.worker import build_worker

        ws_worker = build_worker(client, pool, task_queue=ws_queue, backend=backend_named("noop"))
        raw_worker = Worker(client, task_queue=raw_queue, workflows=[RawBatch],
                            activities=[raw_task])
        rows = []
        try:
            async with ws_worker, raw_worker:
                log("warming up")
                await waystation_job(client, pool, ws_queue, 200, args.workers)
                await raw_job(client, raw_queue, 200, args.workers)
                raw_s = None
                load_start = os.getloadavg()
                if not args.no_raw:
                    log(f"raw: {args.items} no-op activities, {args.workers} at a time")
                    raw_s = await raw_job(client, raw_queue, args.items, args.workers)
                log(f"waystation: {args.items}-item one-step job, noop agent")
                load_before = os.getloadavg()
                rss_during: list[float] = []
                rss = asyncio.create_task(_sample_rss(rss_during))
                ws_s, runs, largest = await waystation_job(client, pool, ws_queue, args.items,
                                                           args.workers, args.round_size)
                rss.cancel()
                load_after = os.getloadavg()
        finally:
            await pool.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ws_rate = args.items / ws_s
    rows.append(["Waystation BatchJob", f"{args.items:,}", f"{ws_s:.1f}", f"{ws_rate:.0f}",
                 f"{runs}", f"{largest:,}"])
    if raw_s is not None:
        rows.append(["raw Temporal (no-op activities)", f"{args.items:,}", f"{raw_s:.1f}",
                     f"{args.items / raw_s:.0f}", "", ""])
    print(markdown_table(["variant", "items", "wall s", "items/s", "workflow runs",
                          "largest history"], rows, [False, True, True, True, True, True]))
    if raw_s is not None:
        print(f"\n- Waystation reaches {ws_rate / (args.items / raw_s):.0%} of the raw ceiling "
              f"(max_workers {args.workers}).")
    size = slice_size(min(args.items, args.round_size or BatchRunInput.model_fields[
        "round_size"].default), args.workers)
    print(f"- design: slices of up to {size} consecutive items per activity, run one after "
          f"another (at most {args.workers} slices at once, each stops starting items after "
          f"{SLICE_BUDGET_SECONDS:g} s); a failed item is retried alone. Raw: one activity "
          "per item.")
    print(f"- peak RSS of the benchmark process (worker, driver and clients): {rss_mb:.0f} MB; "
          f"during the job {min(rss_during):.0f}–{max(rss_during):.0f} MB")
    print(f"- load average (1, 5, 15 min) on {os.cpu_count()} cores: at the start "
          f"{_load(load_start)}, before the job {_load(load_before)}, after it "
          f"{_load(load_after)}")


async def _sample_rss(samples: list[float]) -> None:
    """This process's resident set every half second, in MB (Linux)."""
    while True:
        with open("/proc/self/statm") as statm:  # noqa: ASYNC230 - a tiny procfs read
            samples.append(int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20)
        await asyncio.sleep(0.5)


def _load(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{v:.2f}" for v in load)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_batch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=16, help="max_workers (default 16)")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw ceiling")
    parser.add_argument("--round-size", type=int, default=None,
                        help="items per workflow run of the job (default: the workflow's)")
    args = parser.parse_args(argv)
    asyncio.run(run_bench(args))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
