"""Waystation beside LangGraph (Postgres checkpointer) and DBOS Transact: the toy, the
validation kind and an agent conversation.

    pip install -e '.[bench]'
    python -m bench.bench_peers [--rounds 3] [--runs 20] [--approvals 20] [--throughput-runs 100]
                                [--agent-runs 20] [--kinds toy,validation,agent]

The toy: five phases, each one no-op step that writes one progress event and a state
snapshot, and one human approval after phase 2. The validation kind: Waystation's built-in
kind with the noop backend (five phases of 2, 3, 2, 2, 3 tasks, its first gate after phase
0), its tasks in place as the API settles `tasks: auto` for that backend, and again as
regular activities (`tasks: activity`, as every run ran them before issue 31); the peers run
the same shape, twelve steps and the approval after the second. The agent
conversation: three messages (bench.peer_agent), each a turn of the built-in planner with its
offline model (model request, tool call, model request, summary request): Waystation's agent
kind; LangGraph's `create_react_agent`-shaped graph and a DBOS workflow over the same model
and tools, each request and tool call a durable step of theirs.

Every system runs in its own process, one after the other, in `--rounds` interleaved rounds
(each round starting with the next system), against the same PostgreSQL server (the embedded
one, started here, or DATABASE_URL's), each in a fresh database. Waystation runs the toy as a
plug-in run kind (bench/peer_toy.py) on a Temporal dev server, started as the API starts runs;
the raw-Temporal row is the same shape with one no-op activity per step and nothing written.

- step interval: between consecutive progress events of one run (database clock), p50/p99,
  over `--runs` sequential runs without the approval (raw Temporal: run time / 5);
- approval → next step: from sending the approval to the next step's event, p50/p99;
- runs/s: `--throughput-runs` runs without the approval, 20 at a time.
- CPU ms a run: while runs/s is measured, each process's CPU (the system's Python process,
  its child the Temporal dev server, PostgreSQL's postmaster and backends) over the runs.

For the agent, a "step" is a whole turn (message → answer), "approval → next step" is the
person's message → the model's first request of the turn, and runs/s is conversations/s
(`--agent-runs` sequential conversations timed, as many at `--concurrency` for runs/s).
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
from bench.peers_common import KINDS, Figures
from waystation.persistence.embedded import embedded_database_url, stop_embedded
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
    parser.add_argument("--agent-runs", type=int, default=20)
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma-separated, of {', '.join(KINDS)}")
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
         "--concurrency", str(args.concurrency), "--agent-runs", str(args.agent_runs),
         "--kinds", args.kinds],
        capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        missing = "ModuleNotFoundError" in done.stderr
        log(f"{system}: " + ("not installed: pip install -e '.[bench]'" if missing
                              else f"failed:\n{done.stderr[-3000:]}"))
        return []
    return [Figures(**json.loads(line)) for line in done.stdout.splitlines()
            if line.startswith("{")]


KIND_TITLES = {"toy": "The toy", "validation": "The validation kind (noop backend)",
               "agent": "An agent conversation (the planner, offline model)"}
# For the agent the columns measure a turn, the message → the first model request, and
# conversations/s.
AGENT_COLUMNS = ("turn p50 / p99 (ms)", "message → first model request p50 / p99 (ms)",
                 "conversations/s")
RATIO_COLUMNS = {"agent": ("turn", "message → first model request", "conversations/s")}


def report(rounds: list[list[Figures]], args: argparse.Namespace) -> str:
    """A table per kind. Each figure is the median over the rounds; each ratio is taken
    within a round (the systems of one round ran minutes apart, the rounds further) and given
    as the median with its range."""
    kinds = list(dict.fromkeys(f.kind for one in rounds for f in one))
    body = "\n\n".join(_kind_report(kind, [[f for f in one if f.kind == kind]
                                             for one in rounds], args) for kind in kinds)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"# {platform.node()} · {os.cpu_count()} cores · python "
            f"{platform.python_version()} · {len(rounds)} rounds of {args.runs} runs, "
            f"{args.approvals} approvals, {args.throughput_runs} throughput runs, "
            f"{args.agent_runs} conversations · load average at the end {load}\n\n"
            f"{body}\n")


def _kind_report(kind: str, rounds: list[list[Figures]], args: argparse.Namespace) -> str:
    names = list(dict.fromkeys(f.system for one in rounds for f in one))
    by_name = {name: [f for one in rounds for f in one if f.system == name] for name in names}
    rows = [[name, f"{_median(fs, 'step_p50_ms'):.2f} / {_median(fs, 'step_p99_ms'):.2f}",
             f"{_median(fs, 'approval_p50_ms'):.2f} / {_median(fs, 'approval_p99_ms'):.2f}",
             f"{_median(fs, 'runs_per_s'):.1f}"] for name, fs in by_name.items()]
    columns = AGENT_COLUMNS if kind == "agent" else (
        "step interval p50 / p99 (ms)", "approval → next step p50 / p99 (ms)",
        f"runs/s, {args.concurrency} concurrent")
    table = markdown_table(["system (median of rounds)", *columns], rows,
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
    named = RATIO_COLUMNS.get(kind, ("step", "approval → next step", "runs/s"))
    ratio_table = markdown_table(["p50 ratio in each round, median (range)", named[0],
                                  named[1], f"{named[2]} (higher is better)"],
                                 ratios, [False, True, True, True]) if ratios else ""
    return (f"## {KIND_TITLES.get(kind, kind)}\n\n{table}\n\n{ratio_table}\n\n"
            f"{_cpu_table(by_name)}")


CPU_GROUPS = (("harness", "the system's Python process"), ("children", "Temporal dev server"),
              ("postgres", "PostgreSQL"))


def _cpu_table(by_name: dict[str, list[Figures]]) -> str:
    """CPU ms a run in each process while runs/s was measured, median of rounds: on two
    cores, what bounds runs/s."""
    rows = [[name, *(f"{_median_cpu(fs, group):.1f}" for group, _ in CPU_GROUPS),
             f"{statistics.median(sum(f.cpu_ms_per_run.values()) for f in fs):.1f}"]
            for name, fs in by_name.items() if all(f.cpu_ms_per_run for f in fs)]
    if not rows:
        return ""
    return markdown_table(["CPU ms a run at runs/s (median of rounds)",
                           *(title for _, title in CPU_GROUPS), "total"], rows,
                          [False, True, True, True, True])


def _median_cpu(figures: list[Figures], group: str) -> float:
    return statistics.median(f.cpu_ms_per_run.get(group, 0.0) for f in figures)


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
