"""What metrics and JSON logs cost on the validation benchmark: the same Waystation runs with
both on, beside both off, in one run.

    python -m bench.bench_observability [--decisions N] [--runs N] [--concurrency N]
                                        [--waves N] [--rounds N] [--scrape-seconds S]

One process, one Temporal dev server and one embedded PostgreSQL (or --temporal-address /
DATABASE_URL), as bench_validation. Two Waystation workers, each with its own client, pool and
task queue; the agent backend is `offline` (canned answers at once), so the figures are the
machinery's:

- **on**: the client on a Temporal runtime serving Prometheus metrics (what
  WAYSTATION_WORKER_METRICS_PORT does), the backend counting model calls, tokens and cost
  (MeteredBackend), `/metrics` scraped every `--scrape-seconds` (15), and logs as JSON
  (WAYSTATION_LOG_FORMAT=json) at INFO;
- **off**: the default runtime (no metrics), no meter, and logs as text at INFO.

Logs go to a file in both cases (how many lines each side wrote is printed). The sides are
measured alternately, `--rounds` times (2), so the machine's drift falls on both alike, with
bench_validation's three figures: decision latency, per-phase overhead, throughput.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from temporalio.client import Client

from bench.bench_validation import (
    Bench,
    EventListener,
    bench_database,
    bench_temporal,
    log,
    waystation_decisions,
    waystation_phase_times,
    waystation_throughput,
)
from bench.common import markdown_table, percentile, ratio
from waystation.activities.agents import backend_named
from waystation.activities.agents.metered import MeteredBackend, ModelMeter
from waystation.logs import configure_logging
from waystation.persistence.db import create_pool
from waystation.settings import Settings
from waystation.temporal_client import DATA_CONVERTER
from waystation.testing import free_port
from waystation.worker import build_worker
from waystation.worker_metrics import metrics_runtime

SIDES = ("off", "on")


async def measure(b: Bench, args: argparse.Namespace) -> dict[str, list[float]]:
    return {"decide": await waystation_decisions(b, args.decisions),
            "phase": await waystation_phase_times(b, args.runs),
            "rate": await waystation_throughput(b, args.concurrency, args.waves)}


def log_to(path: Path, log_format: str) -> None:
    """The worker's logging as `waystation worker` sets it up, written to `path`."""
    configure_logging(verbose=False, log_format=log_format)
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(path.open("a", encoding="utf-8"))


@contextlib.asynccontextmanager
async def scraping(url: str, every: float) -> AsyncIterator[list[int]]:
    """Scrapes `url` every `every` seconds, as Prometheus would; yields the sizes scraped."""
    sizes: list[int] = []

    async def loop() -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            while True:
                sizes.append(len((await http.get(url)).content))
                await asyncio.sleep(every)

    task = asyncio.create_task(loop())
    try:
        yield sizes
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def report(args: argparse.Namespace, results: dict[str, dict[str, list[float]]],
           lines: dict[str, int], scrapes: list[int]) -> str:
    ms = 1000.0
    off, on = results["off"], results["on"]
    rows = []
    for label, pct in (("p50", 50), ("p99", 99)):
        a, b = percentile(off["decide"], pct) * ms, percentile(on["decide"], pct) * ms
        rows.append([f"Decision → next phase's first task started, {label} (ms)",
                     f"{a:.1f}", f"{b:.1f}", ratio(b, a)])
    a, b = statistics.median(off["phase"]) * ms, statistics.median(on["phase"]) * ms
    rows.append(["Per-phase overhead, whole run / 5 phases, p50 (ms)",
                 f"{a:.1f}", f"{b:.1f}", ratio(b, a)])
    a, b = statistics.median(off["rate"]), statistics.median(on["rate"])
    rows.append([f"Throughput, {args.concurrency} concurrent whole runs (runs/s)",
                 f"{a:.1f}", f"{b:.1f}", ratio(b, a)])
    table = markdown_table(["Measure", "both off", "metrics + JSON logs", "Ratio (on/off)"],
                           rows, right=[False, True, True, True])
    notes = [
        f"{args.rounds} alternating rounds per side, each: {args.decisions} decisions, "
        f"{args.runs} sequential whole runs, {args.waves} waves of {args.concurrency} "
        "concurrent runs; figures over all rounds.",
        f"Log lines written: off {lines['off']:,}, on {lines['on']:,}; "
        f"{len(scrapes)} scrapes of /metrics (last {scrapes[-1] if scrapes else 0:,} bytes).",
    ]
    return table + "\n\n" + "\n".join(f"- {n}" for n in notes)


async def run_bench(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ws-bench-observability-"))
    logs = {side: folder / f"{side}.log" for side in SIDES}
    port = free_port()
    runtime = metrics_runtime(Settings(worker_metrics_port=port))
    assert runtime is not None
    async with bench_database() as url, bench_temporal(args.temporal_address,
                                                       args.namespace) as plain:
        metered = await Client.connect(plain.service_client.config.target_host,
                                       namespace=args.namespace, runtime=runtime,
                                       data_converter=DATA_CONVERTER)
        clients = {"off": plain, "on": metered}
        pools = {side: await create_pool(url, max_size=args.pool_size) for side in SIDES}
        listener = EventListener()
        await listener.start(url)
        benches = {side: Bench(clients[side], pools[side], listener,
                               ws_queue=f"bench-obs-{side}-{uuid.uuid4()}", raw_queue="")
                   for side in SIDES}
        offline = backend_named("offline")
        backends = {"off": offline, "on": MeteredBackend(offline, ModelMeter(runtime.metric_meter))}
        workers = [build_worker(clients[side], pools[side], task_queue=benches[side].ws_queue,
                                backend=backends[side]) for side in SIDES]
        results: dict[str, dict[str, list[float]]] = {
            side: {"decide": [], "phase": [], "rate": []} for side in SIDES}
        try:
            async with workers[0], workers[1], \
                    scraping(f"http://127.0.0.1:{port}/metrics", args.scrape_seconds) as sizes:
                log("warming up")
                for side in SIDES:
                    await measure(benches[side], argparse.Namespace(
                        decisions=2, runs=2, concurrency=5, waves=1))
                for round_ in range(args.rounds):
                    for side in SIDES:
                        log(f"round {round_ + 1}/{args.rounds}: {side}")
                        log_to(logs[side], "json" if side == "on" else "text")
                        for name, samples in (await measure(benches[side], args)).items():
                            results[side][name].extend(samples)
        finally:
            logging.basicConfig(level=logging.WARNING, force=True)
            await listener.close()
            for pool in pools.values():
                await pool.close()
    lines = {side: len(logs[side].read_text().splitlines()) if logs[side].exists() else 0
             for side in SIDES}
    print(report(args, results, lines, sizes))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_observability",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=30)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--waves", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scrape-seconds", type=float, default=15.0)
    parser.add_argument("--pool-size", type=int, default=10)
    parser.add_argument("--temporal-address", default=None)
    parser.add_argument("--namespace", default="default")
    asyncio.run(run_bench(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
