"""Waystation beside LangGraph (Postgres checkpointer) and DBOS Transact on the same toy.

    pip install -e '.[bench]'
    python -m bench.bench_peers [--rounds 3] [--runs 20] [--approvals 20] [--throughput-runs 100]

The toy: five phases, each one no-op step that writes one progress event and a state
snapshot, and one human approval after phase 2. Every system runs in its own process, one
after the other, in `--rounds` interleaved rounds (each round starting with the next system),
against the same PostgreSQL server (the embedded one, started here, or
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
import statistics
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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=sorted(HARNESSES), action="append")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="waystation-peers-"))
    server = os.environ.get("DATABASE_URL") or embedded_database_url(folder / "pgdata")
    rounds: list[list[Figures]] = []
    systems = args.only or list(HARNESSES)
    try:
        for number in range(args.rounds):
            # Each round starts with the next system, so none always runs first (or last).
            order = systems[number % len(systems):] + systems[:number % len(systems)]
            rounds.append([figure for system in order
                           for figure in _measure(server, system, number, args)])
    finally:
        if "DATABASE_URL" not in os.environ:
            stop_embedded(folder / "pgdata")
        shutil.rmtree(folder, ignore_errors=True)
    print(report(rounds, args))


def _measure(server: str, system: str, number: int, args: argparse.Namespace) -> list[Figures]:
    url = _fresh_database(server, f"{system}_{number}")
    log(f"{system}: measuring (round {number + 1} of {args.rounds})")
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
        return []
    return [Figures(**json.loads(line)) for line in done.stdout.splitlines()
            if line.startswith("{")]


def report(rounds: list[list[Figures]], args: argparse.Namespace) -> str:
    """Each figure is the median over the rounds; each ratio is taken within a round (the
    systems of one round ran minutes apart, the rounds further) and given as the median
    with its range."""
    names = list(dict.fromkeys(f.system for one in rounds for f in one))
    by_name = {name: [f for one in rounds for f in one if f.system == name] for name in names}
    rows = [[name, f"{_median(fs, 'step_p50_ms'):.2f} / {_median(fs, 'step_p99_ms'):.2f}",
             f"{_median(fs, 'approval_p50_ms'):.2f} / {_median(fs, 'approval_p99_ms'):.2f}",
             f"{_median(fs, 'runs_per_s'):.1f}"] for name, fs in by_name.items()]
    table = markdown_table(["system (median of rounds)", "step interval p50 / p99 (ms)",
                            "approval → next step p50 / p99 (ms)",
                            f"runs/s, {args.concurrency} concurrent"], rows,
                           [False, True, True, True])
    ours = next((name for name in names if name.startswith("Waystation")), None)
    ratios = []
    for peer in names:
        if ours is None or peer == ours:
            continue
        pairs = [(next(f for f in one if f.system == ours), next(f for f in one
                                                                  if f.system == peer))
                 for one in rounds if {ours, peer} <= {f.system for f in one}]
        ratios.append([f"Waystation ÷ {peer}",
                       _ratio([w.step_p50_ms / p.step_p50_ms for w, p in pairs]),
                       _ratio([w.approval_p50_ms / p.approval_p50_ms for w, p in pairs]),
                       _ratio([w.runs_per_s / p.runs_per_s for w, p in pairs])])
    ratio_table = markdown_table(["ratio in each round, median (range)", "step",
                                  "approval → next step", "runs/s (higher is better)"],
                                 ratios, [False, True, True, True]) if ratios else ""
    return (f"# {platform.node()} · {os.cpu_count()} cores · python "
            f"{platform.python_version()} · {len(rounds)} rounds of {args.runs} runs, "
            f"{args.approvals} approvals, {args.throughput_runs} throughput runs\n\n"
            f"{table}\n\n{ratio_table}\n")


def _median(figures: list[Figures], field: str) -> float:
    return statistics.median(getattr(f, field) for f in figures)


def _ratio(values: list[float]) -> str:
    if not values:
        return "–"
    return (f"{statistics.median(values):.2f}× ({min(values):.2f}–{max(values):.2f})"
            if len(values) > 1 else f"{values[0]:.2f}×")


def _fresh_database(server_url: str, system: str) -> str:
    return asyncio.run(create_database(server_url, f"peers_{system}", migrate=False))


if __name__ == "__main__":
    main()
