"""The engine's floor: empty activities in a row, on a dev server with the engine's settings
beside the same chain on one with Temporal's defaults (issue 39).

    python -m bench.bench_engine [--rounds 6] [--activities 10] [--sittings 2]

Both dev servers are started here, in the same run, as every benchmark starts one
(`bench_validation.bench_temporal`): with the project's flags (`DEV_SERVER_ARGS`), and with
the same flags less the engine's settings (`dev_server_args(engine={})`: the history
service's queue readers at their default 20 polls a second). A chain is
`waystation.engine_check.run_chain`, the probe `waystation doctor` runs: one workflow of
`--activities` empty regular activities in a row and one worker, a new workflow each round;
`--rounds` chains back to back on one server, as a tight loop does (a default reader's burst
of polls is spent after a few rounds), then the same on the other, the servers' order
alternating between sittings. Figures from the chains' histories: ms per activity (first
activity scheduled → run completed, over the activities) and the wait of each workflow task
that follows an activity (scheduled → started), over every round of every sitting.
"""

from __future__ import annotations

import argparse
import os
import statistics

from bench.bench_validation import bench_temporal, log
from bench.common import markdown_table, percentile, ratio, run_and_exit
from waystation.engine_check import ChainTiming, run_chain
from waystation.engine_settings import DEV_SERVER_ARGS, dev_server_args

SERVERS = {
    "the engine's settings (`DEV_SERVER_ARGS`)": DEV_SERVER_ARGS,
    "Temporal's defaults": dev_server_args(engine={}),
}


async def sitting(args: argparse.Namespace, order: list[str],
                  chains: dict[str, list[ChainTiming]]) -> None:
    for name in order:
        async with bench_temporal(None, "default", SERVERS[name]) as client:
            for _ in range(args.rounds):
                chains[name].append(await run_chain(client, args.activities))
        log(f"{name}: ms per activity by round "
            f"{[round(c.ms_per_activity, 1) for c in chains[name][-args.rounds:]]}")


def report(args: argparse.Namespace, chains: dict[str, list[ChainTiming]]) -> str:
    per_activity = {name: statistics.median(c.ms_per_activity for c in found)
                    for name, found in chains.items()}
    waits = {name: [w for c in found for w in c.waits_ms] for name, found in chains.items()}
    tuned, defaults = SERVERS
    rows = [[name, f"{per_activity[name]:.1f}",
             f"{percentile(waits[name], 50):.1f} / {percentile(waits[name], 90):.1f}",
             " ".join(f"{c.ms_per_activity:.1f}" for c in found)]
            for name, found in chains.items()]
    table = markdown_table(
        ["dev server", "ms per activity, p50", "workflow task wait after one, p50 / p90 (ms)",
         "ms per activity by round"], rows, [False, True, True, False])
    return (f"{args.activities} empty activities in a row, {args.rounds} rounds × "
            f"{args.sittings} sittings a server (load average {os.getloadavg()[0]:.1f})\n\n"
            f"{table}\n\nthe engine's settings ÷ the defaults: "
            f"{ratio(per_activity[tuned], per_activity[defaults])} an activity")


async def run_bench(args: argparse.Namespace) -> None:
    chains: dict[str, list[ChainTiming]] = {name: [] for name in SERVERS}
    order = list(SERVERS)
    for _ in range(args.sittings):
        await sitting(args, order, chains)
        order.reverse()
    print(report(args, chains))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_engine",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6,
                        help="chains back to back on a server in a sitting (default 6)")
    parser.add_argument("--activities", type=int, default=10,
                        help="empty activities in a chain (default 10)")
    parser.add_argument("--sittings", type=int, default=2,
                        help="sittings, the servers' order alternating (default 2)")
    run_and_exit(run_bench(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
