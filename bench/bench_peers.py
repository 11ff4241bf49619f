"""Waystation beside LangGraph (Postgres checkpointer) and DBOS Transact on the same toy.

    pip install -e '.[bench]'
    python -m bench.bench_peers [--runs 20] [--approvals 20] [--throughput-runs 100]

The toy: five phases, each one no-op step that writes one progress event and a state
snapshot, and one human approval after phase 2. Every system runs in its own process, one
after the other, against the same PostgreSQL server (the embedded one, started here, or
DATABASE_URL's), each in a fresh database. Waystation runs the toy as a plug-in run kind
(bench/peer_toy.py) on a Temporal dev server, started as the API starts runs; the raw-Temporal
row is the same shape with one no-op activity per step and nothing written.

- step interval: between consecutive progress events of one run (database clock), p50/p99,
  over `--runs` sequential runs without the approval (raw Temporal: run time / 5);
- approval → next step: from sending the approval to the next step's event, p50/p99;
- runs/s: `--throughput-runs` runs without the approval, 20 at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import markdown_table
from bench.peers_common import Figures
from persistence.embedded import embedded_database_url, stop_embedded
from waystation.testing import create_database

HARNESSES = {"waystation": "bench.peers_waystation", "langgraph": "bench.peers_langgraph",
             "dbos": "bench.peers_dbos"}


def log(message: str) -> None:
    print(f"# {message}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--approvals", type=int, default=20)
    parser.add_argument("--throughput-runs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--only", choices=sorted(HARNESSES), action="append")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="waystation-peers-"))
    server = os.environ.get("DATABASE_URL") or embedded_database_url(folder / "pgdata")
    results: list[Figures] = []
    try:
        for system in args.only or list(HARNESSES):
            url = _fresh_database(server, system)
            log(f"{system}: measuring")
            done = subprocess.run(
                [sys.executable, "-m", HARNESSES[system], "--database-url", url,
                 "--runs", str(args.runs), "--approvals", str(args.approvals),
                 "--throughput-runs", str(args.throughput_runs),
                 "--concurrency", str(args.concurrency)],
                capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                missing = "ModuleNotFoundError" in done.stderr
                log(f"{system}: " + ("not installed: pip install -e '.[bench]'" if missing
                                      else f"failed:\n{done.stderr[-3000:]}"))
                continue
            results += [Figures(**json.loads(line)) for line in done.stdout.splitlines()
                        if line.startswith("{")]
    finally:
        if "DATABASE_URL" not in os.environ:
            stop_embedded(folder / "pgdata")
        shutil.rmtree(folder, ignore_errors=True)
    print(report(results, args))


def report(results: list[Figures], args: argparse.Namespace) -> str:
    rows = [[r.system, f"{r.step_p50_ms:.2f} / {r.step_p99_ms:.2f}",
             f"{r.approval_p50_ms:.2f} / {r.approval_p99_ms:.2f}", f"{r.runs_per_s:.1f}"]
            for r in results]
    table = markdown_table(["system", "step interval p50 / p99 (ms)",
                            "approval → next step p50 / p99 (ms)",
                            f"runs/s, {args.concurrency} concurrent"], rows,
                           [False, True, True, True])
    ours = next((r for r in results if r.system.startswith("Waystation")), None)
    ratios = []
    if ours is not None:
        for peer in results:
            if peer is ours:
                continue
            ratios.append([f"Waystation ÷ {peer.system}",
                           f"{ours.step_p50_ms / peer.step_p50_ms:.2f}×",
                           f"{ours.approval_p50_ms / peer.approval_p50_ms:.2f}×",
                           f"{ours.runs_per_s / peer.runs_per_s:.2f}×"])
    ratio_table = markdown_table(["ratio (p50; runs/s: higher is better)", "step",
                                  "approval → next step", "runs/s"], ratios,
                                 [False, True, True, True]) if ratios else ""
    return (f"# {platform.node()} · {os.cpu_count()} cores · python "
            f"{platform.python_version()} · {args.runs} runs, {args.approvals} approvals, "
            f"{args.throughput_runs} throughput runs\n\n{table}\n\n{ratio_table}\n")


def _fresh_database(server_url: str, system: str) -> str:
    return asyncio.run(create_database(server_url, f"peers_{system}", migrate=False))

if __name__ == "__main__":
    main()
