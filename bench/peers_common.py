"""What the three peer harnesses share: the progress-event table, the shapes of the run kinds
measured (the toy, the validation-like run), how a run's step times are read back, and the
figures each harness reports.

Every system writes its progress events to PostgreSQL with the database's clock, so step
intervals and approval latencies are measured the same way for all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any

import asyncpg
import psutil

from bench.common import percentile

PHASES = 5
APPROVE_AFTER = 2
KINDS = ("toy", "validation", "agent")
EVENTS_TABLE = """CREATE TABLE IF NOT EXISTS peer_events (
    run_id text NOT NULL, step int NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (run_id, step))"""
# Idempotent like every Waystation write, so the peers do the same work.
INSERT_EVENT = "INSERT INTO peer_events (run_id, step) VALUES ($1, $2) ON CONFLICT DO NOTHING"
# A human's click comes well after the question is shown: the harnesses that see the question
# by polling the database (DBOS's, Waystation's) let the run settle this long before
# approving, as LangGraph's does by returning at its interrupt.
HUMAN_PAUSE_S = 0.05


@dataclass(frozen=True)
class Shape:
    """A run of `steps` sequential steps, each writing one progress event, with one human
    approval after step `approve_after`."""
    kind: str
    steps: int
    approve_after: int


TOY = Shape("toy", PHASES, APPROVE_AFTER)
# The validation kind's phases (kinds/validation/phases.py): 2, 3, 2, 2, 3 tasks, and its
# first gate (approve_founders_brief) after phase 0's two tasks.
VALIDATION_TASKS = (2, 3, 2, 2, 3)
VALIDATION = Shape("validation", sum(VALIDATION_TASKS), VALIDATION_TASKS[0])


@dataclass
class Figures:
    system: str
    step_p50_ms: float
    step_p99_ms: float
    approval_p50_ms: float
    approval_p99_ms: float
    runs_per_s: float
    # toy, validation or agent; for the agent a "step" is a whole turn and the approval is
    # the person's message (see bench.peer_agent).
    kind: str = "toy"
    # CPU ms a run in each process while runs/s was measured (see CpuMeter).
    cpu_ms_per_run: dict[str, float] = field(default_factory=dict)


@dataclass
class Plan:
    database_url: str
    runs: int  # sequential runs timed for step intervals
    approvals: int  # sequential runs timed from approval to the next step
    throughput_runs: int
    concurrency: int
    kinds: tuple[str, ...] = KINDS
    agent_runs: int = 20  # sequential conversations timed (and as many for runs/s)


def intervals_ms(times: list[float]) -> list[float]:
    return [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]


async def step_times(conn: asyncpg.Connection, sql: str, run_id: str) -> list[float]:
    """The run's step timestamps (epoch seconds, database clock), in step order."""
    return [r[0].timestamp() for r in await conn.fetch(sql, run_id)]


async def wait_for_row(conn: asyncpg.Connection, sql: str, *args: object,
                       timeout: float = 30.0) -> asyncpg.Record:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        row = await conn.fetchrow(sql, *args)
        if row is not None:
            return row
        if time.monotonic() > deadline:
            raise TimeoutError(f"no row for {sql!r} {args}")
        await asyncio.sleep(0.002)


async def next_step_ms(conn: asyncpg.Connection, run_id: str, sent: float,
                       shape: Shape = TOY) -> float:
    """From `sent` (epoch seconds) to the event of the step after the approval."""
    row = await wait_for_row(conn, "SELECT created_at FROM peer_events "
                                   "WHERE run_id = $1 AND step = $2", run_id,
                             shape.approve_after + 1)
    return (row[0].timestamp() - sent) * 1000


class CpuMeter:
    """CPU time (user + system) of the processes a run costs: this harness's (the peers'
    whole engine, Waystation's worker and starter), its child processes (the Temporal dev
    server) and the PostgreSQL server's (the postmaster and its backends, which the harness's
    pools keep open). On two cores, CPU a run is what bounds runs/s."""

    def __init__(self, postmaster: psutil.Process) -> None:
        self._postmaster = postmaster

    @classmethod
    async def for_database(cls, database_url: str) -> CpuMeter:
        conn = await asyncpg.connect(database_url)
        try:  # the backend's parent, while the backend lives
            postmaster = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")).parent()
        finally:
            await conn.close()
        assert postmaster is not None
        return cls(postmaster)

    def sample(self) -> dict[str, float]:
        own = psutil.Process()
        groups = {"harness": [own], "children": own.children(recursive=True),
                  "postgres": [self._postmaster, *self._postmaster.children()]}
        return {name: sum(_cpu_s(p) for p in processes) for name, processes in groups.items()}


def _cpu_s(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return times.user + times.system


async def throughput(start_and_finish: Callable[[], Awaitable[None]], runs: int,
                     concurrency: int, meter: CpuMeter | None = None
                     ) -> tuple[float, dict[str, float]]:
    """Runs per second with `concurrency` runs in flight, and CPU ms a run in each process
    group that `meter` watches."""
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await start_and_finish()
    before = meter.sample() if meter else {}
    began = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(runs)))
    elapsed = time.perf_counter() - began
    after = meter.sample() if meter else {}
    cpu = {name: (after[name] - before.get(name, 0.0)) * 1000 / runs for name in after}
    return runs / elapsed, cpu


def figures(system: str, steps: list[float], approvals: list[float], rps: float,
            kind: str = "toy", cpu_ms_per_run: dict[str, float] | None = None) -> Figures:
    return Figures(system=system, step_p50_ms=percentile(steps, 50),
                   step_p99_ms=percentile(steps, 99), approval_p50_ms=percentile(approvals, 50),
                   approval_p99_ms=percentile(approvals, 99), runs_per_s=rps, kind=kind,
                   cpu_ms_per_run=cpu_ms_per_run or {})


async def measure_shape(system: str, shape: Shape, plan: Plan, conn: asyncpg.Connection,
                        step_sql: str, *, run_straight: Callable[[], Awaitable[str]],
                        approve_one: Callable[[], Awaitable[float]]) -> Figures:
    """The same three measurements for every system and shape: `run_straight` runs the shape
    without its approval and returns the run id (its steps are read back with `step_sql`),
    `approve_one` runs it to its approval and returns approval → next step in ms."""
    for _ in range(3):  # warm up
        await run_straight()
    steps: list[float] = []
    for _ in range(plan.runs):
        steps += intervals_ms(await step_times(conn, step_sql, await run_straight()))
    approvals = [await approve_one() for _ in range(plan.approvals)]

    async def one_run() -> None:
        await run_straight()
    rps, cpu = await throughput(one_run, plan.throughput_runs, plan.concurrency,
                                await CpuMeter.for_database(plan.database_url))
    return figures(system, steps, approvals, rps, shape.kind, cpu)


async def measure_agent(system: str, plan: Plan, *,
                        converse: Callable[[bool], Awaitable[list[tuple[float, float]]]]
                        ) -> Figures:
    """The agent conversation for every system: `converse(timed)` holds one conversation of
    `bench.peer_agent.MESSAGES` and, when timed (one conversation at a time), returns per
    turn (message → answer, message → the turn's first model request) in ms."""
    for _ in range(2):  # warm up
        await converse(True)
    turns: list[tuple[float, float]] = []
    for _ in range(plan.agent_runs):
        turns += await converse(True)

    async def one_run() -> None:
        await converse(False)
    rps, cpu = await throughput(one_run, plan.agent_runs, plan.concurrency,
                                await CpuMeter.for_database(plan.database_url))
    return figures(system, [t for t, _ in turns], [f for _, f in turns], rps, "agent", cpu)


def new_run_id() -> str:
    return str(uuid.uuid4())


def harness_main(measure: Callable[[Plan], Coroutine[Any, Any, list[Figures]]]) -> None:
    """A harness runs in its own process and prints its figures as JSON lines."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--approvals", type=int, default=20)
    parser.add_argument("--throughput-runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--agent-runs", type=int, default=20)
    parser.add_argument("--kinds", default=",".join(KINDS))
    args = parser.parse_args()
    plan = Plan(database_url=args.database_url, runs=args.runs, approvals=args.approvals,
                throughput_runs=args.throughput_runs, concurrency=args.concurrency,
                kinds=tuple(args.kinds.split(",")), agent_runs=args.agent_runs)
    for result in asyncio.run(measure(plan)):
        print(json.dumps(asdict(result)), flush=True)
    sys.exit(0)
