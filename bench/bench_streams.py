"""Live SSE event streams against raw LISTEN/NOTIFY.

    python -m bench.bench_streams [--events N] [--clients N] [--client-procs N]

One run of this script starts an embedded PostgreSQL in a temporary folder (or uses
DATABASE_URL, in a fresh database it drops afterwards) and the API as a separate process
(`python -m waystation api`), so the API's CPU and memory are its own. No Temporal server is
needed: the stream endpoint never talks to Temporal. SSE clients (httpx) run in separate
client processes, so neither the writer nor the API shares an event loop with them.

Timing: every event is appended by `append_run_events` through `waystation.persistence.events`; the
writer records t0 = CLOCK_MONOTONIC (system-wide on Linux) right after the append returns,
i.e. after commit (it also puts its pre-append timestamp in the event's `output`). A client
records t1 when it has parsed the event. Latency = t1 - t0.

1. Latency: one client, one run, --events events paced at --rate per second.
   Baseline, same server, same pacing: a connection runs `SELECT pg_notify(...)` with a
   timestamp in the payload (autocommit), a LISTEN connection in a client process receives it;
   t0 right after pg_notify returns, t1 in the listener callback.
2. Fan-out at --fanout-rate events/s total for --fanout-seconds: (a) --clients clients on one
   run, (b) --clients clients each on its own run. Every client must receive seq 1..N exactly
   once, in order. Reported: p50/p99 latency over all deliveries, the API process's CPU over the
   window (from the first write until the last client has its last event) and its peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from array import array
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil

SECRET = "bench-streams-secret-0123456789-abcdef"
NOTIFY_CHANNEL = "bench_streams_baseline"


# ------------------------------------------------------------------ small helpers


def percentile(samples: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of unsorted samples."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_database(url: str, name: str) -> str:
    head, sep, query = url.partition("?")
    scheme_host, _, _ = head.rpartition("/")
    return f"{scheme_host}/{name}{sep}{query}"


# ------------------------------------------------------------------ client processes


@dataclass
class ClientJob:
    kind: str  # "sse" or "notify"
    target: str  # API base URL, or DSN for "notify"
    token: str
    run_ids: list[str]  # one per SSE client (repeats allowed)
    expect: list[int]  # last seq each client must reach (per client), or N for "notify"
    timeout: float


@dataclass
class ClientResult:
    ok: bool
    received: int
    t1: bytes  # array('q') of arrival times, index i = seq i + 1
    problem: str = ""


def client_main(job: ClientJob, pipe: Connection) -> None:
    """Entry point of a client process: report "ready", then the results."""
    try:
        runner = _sse_clients if job.kind == "sse" else _notify_listener
        results = asyncio.run(runner(job, pipe))
        pipe.send(("done", results, _own_cpu()))
    except BaseException as error:  # report anything to the parent rather than hang it
        pipe.send(("error", repr(error), None))
        raise


def _own_cpu() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system


async def _sse_clients(job: ClientJob, pipe: Connection) -> list[ClientResult]:
    limits = httpx.Limits(max_connections=len(job.run_ids) + 10,
                          max_keepalive_connections=len(job.run_ids) + 10)
    timeout = httpx.Timeout(job.timeout, connect=30.0, pool=60.0)
    headers = {"Authorization": f"Bearer {job.token}"}
    connected = 0
    all_connected = asyncio.Event()
    refused = asyncio.Event()  # one client refused: the others may never get an event

    async def one(run_id: str, expect: int) -> ClientResult:
        nonlocal connected
        t1 = array("q", bytes(8 * expect))
        got = 0
        async with http.stream("GET", f"/runs/{run_id}/events/stream",
                               headers=headers) as response:
            connected += 1
            if connected == len(job.run_ids):
                all_connected.set()
            if response.status_code != 200:
                refused.set()
                await response.aread()
                return ClientResult(False, 0, b"", f"HTTP {response.status_code}: "
                                    f"{response.text[:200]}")
            async for seq, now in _sse_ids(response):
                if seq != got + 1:
                    return ClientResult(False, got, b"", f"expected seq {got + 1}, got {seq}")
                t1[got] = now
                got = seq
                if got == expect:
                    return ClientResult(True, got, t1.tobytes())
        return ClientResult(False, got, b"", "stream ended early")

    async with httpx.AsyncClient(base_url=job.target, limits=limits, timeout=timeout) as http:
        tasks = [asyncio.create_task(one(r, n)) for r, n in zip(job.run_ids, job.expect,
                                                                 strict=True)]
        waiter = asyncio.create_task(all_connected.wait())
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        pipe.send(("ready", connected, None))
        aborter = asyncio.create_task(refused.wait())
        either: list[asyncio.Future[Any]] = [aborter, asyncio.gather(*tasks,
                                                                     return_exceptions=True)]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if refused.is_set():
            await asyncio.sleep(10)  # the writer's window; then give up on the rest
            for task in tasks:
                task.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        waiter.cancel()
        aborter.cancel()
    return [d if isinstance(d, ClientResult)
            else ClientResult(False, 0, b"", "gave up: another client was refused")
            if isinstance(d, asyncio.CancelledError) else ClientResult(False, 0, b"", repr(d))
            for d in done]


async def _sse_ids(response: httpx.Response) -> AsyncIterator[tuple[int, int]]:
    """(seq, arrival time) of each complete SSE event with an id; the same framing rules as
    tests/sse_client.py, and each event's data is JSON-decoded as a real client would."""
    import json

    data: list[str] = []
    event_id: int | None = None
    async for line in response.aiter_lines():
        if line == "":
            if data:
                json.loads("\n".join(data))
                if event_id is not None:
                    yield event_id, time.monotonic_ns()
            data, event_id = [], None
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            elif name == "id":
                event_id = int(value)


async def _notify_listener(job: ClientJob, pipe: Connection) -> list[ClientResult]:
    expect = job.expect[0]
    t1 = array("q", bytes(8 * expect))
    seen = 0
    finished = asyncio.Event()

    def on_notify(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        nonlocal seen
        now = time.monotonic_ns()
        index = int(payload.partition(":")[0])
        t1[index - 1] = now
        seen += 1
        if seen == expect:
            finished.set()

    conn = await asyncpg.connect(job.target)
    try:
        await conn.add_listener(NOTIFY_CHANNEL, on_notify)
        pipe.send(("ready", 1, None))
        await asyncio.wait_for(finished.wait(), timeout=job.timeout)
    finally:
        await conn.close()
    return [ClientResult(seen == expect, seen, t1.tobytes())]


class ClientProcs:
    """Client processes holding the jobs' connections; ready once every client is connected."""

    def __init__(self, jobs: list[ClientJob]) -> None:
        ctx = mp.get_context("spawn")
        self.pipes: list[Connection] = []
        self.procs: list[Any] = []
        for job in jobs:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=client_main, args=(job, child), daemon=True)
            proc.start()
            self.pipes.append(parent)
            self.procs.append(proc)

    async def _recv(self, pipe: Connection, wait_s: float) -> tuple[str, Any, Any]:
        if not await asyncio.to_thread(pipe.poll, wait_s):
            raise TimeoutError("client process did not answer")
        return pipe.recv()

    async def ready(self, wait_s: float = 90.0) -> None:
        for pipe in self.pipes:
            kind, value, _ = await self._recv(pipe, wait_s)
            if kind != "ready":
                raise RuntimeError(f"client process failed before ready: {value}")

    async def results(self, wait_s: float) -> tuple[list[ClientResult], float]:
        results: list[ClientResult] = []
        cpu = 0.0
        for pipe in self.pipes:
            kind, value, cpu_s = await self._recv(pipe, wait_s)
            if kind != "done":
                raise RuntimeError(f"client process failed: {value}")
            results.extend(value)
            cpu += cpu_s
        return results, cpu

    def close(self) -> None:
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


# ------------------------------------------------------------------ API process monitor


@dataclass
class ApiMonitor:
    pid: int
    peak_rss: int = 0
    _task: asyncio.Task[None] | None = None
    _cpu0: float = 0.0
    _wall0: float = 0.0
    samples: list[int] = field(default_factory=list)

    def _cpu(self) -> float:
        t = psutil.Process(self.pid).cpu_times()
        return t.user + t.system

    def start(self) -> None:
        self.peak_rss = 0
        self._cpu0 = self._cpu()
        self._wall0 = time.monotonic()
        self._task = asyncio.create_task(self._sample())

    async def _sample(self) -> None:
        proc = psutil.Process(self.pid)
        while True:
            self.peak_rss = max(self.peak_rss, proc.memory_info().rss)
            await asyncio.sleep(0.05)

    def stop(self) -> tuple[float, float, int]:
        """(CPU seconds, wall seconds, peak RSS sampled) since start."""
        assert self._task is not None
        self._task.cancel()
        self.peak_rss = max(self.peak_rss, psutil.Process(self.pid).memory_info().rss)
        return self._cpu() - self._cpu0, time.monotonic() - self._wall0, self.peak_rss

    def hwm(self) -> int:
        """VmHWM: the API process's peak resident set over its whole life."""
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0


# ------------------------------------------------------------------ writers


async def write_events(pool: asyncpg.Pool, run_ids: list[uuid.UUID], total: int, rate: float,
                       writers: int) -> tuple[dict[uuid.UUID, list[int]],
                                              dict[uuid.UUID, list[int]]]:
    """Append `total` events round-robin over `run_ids`, event k due at start + k / rate, by
    `writers` connections (a run always goes to the same writer when len(run_ids) % writers
    == 0). Returns, per run, the monotonic ns after commit and the one embedded in the event
    before the append (index i = seq i + 1)."""
    from waystation.persistence.events import append_events
    from waystation.persistence.writes import EventWrite

    slots: dict[uuid.UUID, dict[int, tuple[int, int]]] = {r: {} for r in run_ids}
    start = time.monotonic() + 0.05

    async def writer(w: int) -> None:
        async with pool.acquire() as conn:
            for k in range(w, total, writers):
                delay = start + k / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                run_id = run_ids[k % len(run_ids)]
                key = f"e{k}"
                before = time.monotonic_ns()
                event = EventWrite(event_key=key, type="bench.tick", status="ok",
                                   output={"k": k, "t_write_ns": before})
                seqs = await append_events(conn, run_id, [event])
                slots[run_id][seqs[key]] = (time.monotonic_ns(), before)

    await asyncio.gather(*(writer(w) for w in range(writers)))
    committed = {r: [by_seq[s][0] for s in range(1, len(by_seq) + 1)]
                 for r, by_seq in slots.items()}
    written = {r: [by_seq[s][1] for s in range(1, len(by_seq) + 1)]
               for r, by_seq in slots.items()}
    return committed, written


async def notify_events(url: str, total: int, rate: float) -> tuple[list[int], list[int]]:
    """(monotonic ns after pg_notify returned, the one in the payload before sending)."""
    conn = await asyncpg.connect(url)
    t0: list[int] = []
    sent: list[int] = []
    try:
        start = time.monotonic() + 0.05
        for k in range(1, total + 1):
            delay = start + (k - 1) / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            before = time.monotonic_ns()
            await conn.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, f"{k}:{before}")
            t0.append(time.monotonic_ns())
            sent.append(before)
    finally:
        await conn.close()
    return t0, sent


# ------------------------------------------------------------------ the phases


@dataclass
class Figures:
    latencies: list[int]  # t1 - after commit
    from_write: list[int]  # t1 - before the write was sent
    clients_ok: int
    clients: int
    events: int
    problems: list[str]
    api_cpu_pct: float = 0.0
    api_rss: int = 0
    client_cpu_pct: float = 0.0
    wall: float = 0.0


def latencies_of(results: list[ClientResult], runs_of_clients: list[uuid.UUID],
                 t0: dict[uuid.UUID, list[int]]) -> tuple[list[int], int, list[str]]:
    lat: list[int] = []
    ok = 0
    problems = []
    for result, run_id in zip(results, runs_of_clients, strict=True):
        if not result.ok:
            problems.append(result.problem or f"received {result.received}")
            continue
        t1 = array("q")
        t1.frombytes(result.t1)
        sent = t0[run_id]
        if len(t1) != len(sent):
            problems.append(f"received {len(t1)} of {len(sent)}")
            continue
        ok += 1
        lat.extend(b - a for a, b in zip(sent, t1, strict=True))
    return lat, ok, problems


def split(items: list[Any], parts: int) -> list[list[Any]]:
    return [items[i::parts] for i in range(parts) if items[i::parts]]


async def sse_phase(args: argparse.Namespace, pool: asyncpg.Pool, api_url: str, pid: int,
                    client_runs: list[uuid.UUID], total: int, rate: float, writers: int,
                    procs: int) -> Figures:
    from waystation.api.auth import issue_token

    distinct = list(dict.fromkeys(client_runs))
    per_run = total // len(distinct)
    total = per_run * len(distinct)
    token = issue_token(SECRET, "bench")
    parts = split(client_runs, procs)
    jobs = [ClientJob("sse", api_url, token, [str(r) for r in part], [per_run] * len(part),
                      timeout=args.timeout) for part in parts]
    clients = ClientProcs(jobs)
    monitor = ApiMonitor(pid)
    try:
        await clients.ready()
        monitor.start()
        wall0 = time.monotonic()
        t0, sent = await write_events(pool, distinct, total, rate, writers)
        results, client_cpu = await clients.results(wait_s=args.timeout + 30)
        cpu, wall, rss = monitor.stop()
    finally:
        clients.close()
    ordered_runs = [r for part in parts for r in part]
    lat, ok, problems = latencies_of(results, ordered_runs, t0)
    from_write, _, _ = latencies_of(results, ordered_runs, sent)
    return Figures(lat, from_write, ok, len(client_runs), per_run, problems, 100 * cpu / wall, rss,
                   100 * client_cpu / (time.monotonic() - wall0), wall)


async def notify_phase(args: argparse.Namespace, url: str, total: int, rate: float) -> Figures:
    clients = ClientProcs([ClientJob("notify", url, "", [], [total], timeout=args.timeout)])
    try:
        await clients.ready()
        t0, sent = await notify_events(url, total, rate)
        results, _ = await clients.results(wait_s=args.timeout + 30)
    finally:
        clients.close()
    key = uuid.UUID(int=0)
    lat, ok, problems = latencies_of(results, [key], {key: t0})
    from_write, _, _ = latencies_of(results, [key], {key: sent})
    return Figures(lat, from_write, ok, 1, total, problems)


async def create_runs(pool: asyncpg.Pool, count: int) -> list[uuid.UUID]:
    from waystation.persistence.runs import create_run

    ids = [uuid.uuid4() for _ in range(count)]
    async with pool.acquire() as conn:
        for run_id in ids:
            await create_run(conn, run_id=run_id, kind="validation", owner="bench",
                             group_id=None, workflow_id=f"validation-{run_id}",
                             idempotency_key=None, input={})
    return ids


# ------------------------------------------------------------------ infrastructure


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    base = os.environ.get("DATABASE_URL")
    if base:
        yield base
        return
    from waystation.persistence.embedded import embedded_database_url, stop_embedded

    folder = Path(tempfile.mkdtemp(prefix="waystation-bench-pg-"))
    try:
        yield embedded_database_url(folder / "pgdata")
    finally:
        stop_embedded(folder / "pgdata")
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.asynccontextmanager
async def fresh_database(base: str) -> AsyncIterator[str]:
    from waystation.persistence.migrate import apply_migrations
    from waystation.registry import load_registry

    name = f"waystation_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(base)
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    url = with_database(base, name)
    try:
        conn = await asyncpg.connect(url)
        try:
            await apply_migrations(conn, folders=load_registry().migration_folders())
        finally:
            await conn.close()
        yield url
    finally:
        admin = await asyncpg.connect(base)
        with contextlib.suppress(asyncpg.PostgresError):
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def spawn_api(url: str, port: int, log_path: Path, clients: int) -> subprocess.Popen[bytes]:
    # Every client is the one bench user: its open streams are allowed up to the clients.
    env = {**os.environ, "DATABASE_URL": url, "WAYSTATION_JWT_SECRET": SECRET,
           "WAYSTATION_API_PORT": str(port), "WAYSTATION_API_HOST": "127.0.0.1",
           "TEMPORAL_ADDRESS": "127.0.0.1:1", "WAYSTATION_ENV": "dev",
           "WAYSTATION_MAX_STREAMS_PER_USER": str(clients)}
    with open(log_path, "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "waystation", "api"], env=env,
                                stdout=log, stderr=subprocess.STDOUT)


def tail(path: Path, chars: int) -> str:
    return path.read_text(errors="replace")[-chars:]


@contextlib.asynccontextmanager
async def api_process(url: str, log_path: Path, clients: int) -> AsyncIterator[tuple[str, int]]:
    port = free_port()
    proc = spawn_api(url, port, log_path, clients)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as http:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"API exited: {tail(log_path, 2000)}")
                with contextlib.suppress(httpx.TransportError):
                    await http.get("/healthz")  # 503 without Temporal, but it answers
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("API did not start")
                await asyncio.sleep(0.2)
        yield base, proc.pid
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ main


async def run(args: argparse.Namespace) -> int:
    from waystation.persistence.db import create_pool

    started = time.monotonic()
    with postgres() as base:
        async with fresh_database(base) as url:
            pool = await create_pool(url, min_size=1, max_size=max(args.writers, 2))
            tmp = Path(tempfile.mkdtemp(prefix="waystation-bench-api-"))
            try:
                async with api_process(url, tmp / "api.log", args.clients) as (api_url, pid):
                    code = await measure(args, pool, url, api_url, pid)
                    if code:
                        print(f"API log (tail):\n{tail(tmp / 'api.log', 3000)}")
            finally:
                await pool.close()
                shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ntotal runtime {time.monotonic() - started:.1f} s")
    return code


async def measure(args: argparse.Namespace, pool: asyncpg.Pool, url: str, api_url: str,
                  pid: int) -> int:
    print(f"# Waystation SSE streams vs raw LISTEN/NOTIFY  ({os.cpu_count()} cores, "
          f"python {sys.version.split()[0]}, asyncpg {asyncpg.__version__}, "
          f"httpx {httpx.__version__})\n")
    print(f"1. latency: {args.events} events at {args.rate:.0f}/s, 1 client, 1 run ...",
          flush=True)
    run_id = (await create_runs(pool, 1))[0]
    single = await sse_phase(args, pool, api_url, pid, [run_id], args.events, args.rate,
                             writers=1, procs=1)
    baseline = await notify_phase(args, url, args.events, args.rate)

    n = args.clients
    fan_total = int(args.fanout_rate * args.fanout_seconds)
    print(f"2a. fan-out: {n} clients on 1 run, {fan_total} events at "
          f"{args.fanout_rate:.0f}/s ...", flush=True)
    run_id = (await create_runs(pool, 1))[0]
    one_run = await sse_phase(args, pool, api_url, pid, [run_id] * n, fan_total,
                              args.fanout_rate, writers=args.writers, procs=args.client_procs)
    print(f"2b. fan-out: {n} clients on {n} runs, {fan_total} events at "
          f"{args.fanout_rate:.0f}/s total ...", flush=True)
    runs = await create_runs(pool, n)
    many_runs = await sse_phase(args, pool, api_url, pid, runs, fan_total, args.fanout_rate,
                                writers=args.writers, procs=args.client_procs)
    hwm = ApiMonitor(pid).hwm()

    def p(fig: Figures, pct: float) -> float:
        return percentile(fig.latencies, pct)

    def pw(fig: Figures, pct: float) -> float:
        return percentile(fig.from_write, pct)

    rows = []
    for pct in (50, 99):
        rows.append([f"p{pct}: commit -> parsed (waystation) vs NOTIFY sent -> received (raw)",
                     ms(p(single, pct)), ms(pw(baseline, pct)),
                     ratio(p(single, pct), pw(baseline, pct))])
    for pct in (50, 99):
        rows.append([f"p{pct}: write/NOTIFY returned -> received (both)", ms(p(single, pct)),
                     ms(p(baseline, pct)), ratio(p(single, pct), p(baseline, pct))])
    for pct in (50, 99):
        rows.append([f"p{pct}: write/NOTIFY sent -> received (both)", ms(pw(single, pct)),
                     ms(pw(baseline, pct)), ratio(pw(single, pct), pw(baseline, pct))])
    rows += [
        ["max: commit -> parsed / NOTIFY sent -> received", ms(max(single.latencies, default=0)),
         ms(max(baseline.from_write, default=0)), "-"],
        ["1 client: every event once, in order", f"{single.clients_ok}/1 x {single.events}",
         f"{baseline.clients_ok}/1 x {baseline.events}", "-"],
    ]
    for label, fig in ((f"{n} clients / 1 run", one_run), (f"{n} clients / {n} runs", many_runs)):
        rows += [
            [f"{label}: clients with every event once, in order",
             f"{fig.clients_ok}/{fig.clients} (x {fig.events} events)", "-", "-"],
            [f"{label}: latency p50", ms(p(fig, 50)), "-", "-"],
            [f"{label}: latency p99", ms(p(fig, 99)), ms(pw(baseline, 99)),
             ratio(p(fig, 99), pw(baseline, 99))],
            [f"{label}: latency max", ms(max(fig.latencies, default=0)), "-", "-"],
            [f"{label}: deliveries/s", f"{len(fig.latencies) / fig.wall:,.0f}", "-", "-"],
            [f"{label}: API CPU (% of one core)", f"{fig.api_cpu_pct:.0f}%", "-", "-"],
            [f"{label}: API peak RSS (sampled)", f"{fig.api_rss / 2**20:.0f} MiB", "-", "-"],
            [f"{label}: client process CPU (% of one core)", f"{fig.client_cpu_pct:.0f}%",
             "-", "-"],
        ]
    rows.append(["API peak RSS over the whole run (VmHWM)", f"{hwm / 2**20:.0f} MiB", "-", "-"])
    print()
    print(markdown_table(["figure", "waystation", "baseline (raw NOTIFY)", "ratio"], rows))
    print(f"\nclients: {args.client_procs} client process(es) with httpx.AsyncClient; "
          f"writers: {args.writers} connection(s) (1 for the latency test); fan-out window "
          f"2a {one_run.wall:.1f} s, 2b {many_runs.wall:.1f} s (first write to last event)")
    for label, fig in (("1 client", single), ("2a", one_run), ("2b", many_runs)):
        for problem in sorted(set(fig.problems))[:5]:
            print(f"problem ({label}): {problem} "
                  f"[{fig.problems.count(problem)} client(s)]")
    p50_ok = p(single, 50) <= 2 * pw(baseline, 50)
    p99_ok = p(single, 99) < 50e6
    print(f"\ntargets: p50 within 2x of raw NOTIFY: {'PASS' if p50_ok else 'FAIL'}; "
          f"p99 under 50 ms (1 client): {'PASS' if p99_ok else 'FAIL'}; "
          f"fan-out p99 under 50 ms: 2a {'PASS' if p(one_run, 99) < 50e6 else 'FAIL'}, "
          f"2b {'PASS' if p(many_runs, 99) < 50e6 else 'FAIL'}")
    complete = all(f.clients_ok == f.clients for f in (single, baseline, one_run, many_runs))
    return 0 if complete else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000, help="latency test events")
    parser.add_argument("--rate", type=float, default=500.0, help="latency test events/s")
    parser.add_argument("--clients", type=int, default=200, help="fan-out clients")
    parser.add_argument("--fanout-rate", type=float, default=1000.0, help="events/s in total")
    parser.add_argument("--fanout-seconds", type=float, default=5.0)
    parser.add_argument("--writers", type=int, default=4, help="writer connections (fan-out)")
    parser.add_argument("--client-procs", type=int, default=1, help="SSE client processes")
    parser.add_argument("--timeout", type=float, default=150.0, help="per-phase client timeout, s")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
