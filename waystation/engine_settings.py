"""The Temporal dev server's settings: one list for every place that starts one.

`waystation up` (waystation/devstack.py), the test fixtures and every benchmark's server,
raw-Temporal baselines included (`waystation.testing.DEV_SERVER_ARGS`), start the dev server
with these flags, so Waystation and its baselines always run on the same engine; a test reads
them back from the running servers' command lines (tests/faults/test_engine_settings.py).
docker-compose.yml's server reads the same values from deploy/temporal/dynamicconfig.yaml
(tests/unit/test_compose.py keeps the two equal).

The dynamic config values take out the history service's throttles (issue 39). Each queue
reader of a history shard polls at most `…MaxPollRPS` times a second (20 by default; the dev
server has one shard): once its burst is spent, every task that follows waits for the next
slot, about 50 ms. Measured with a chain of empty activities, a chain of short timers and a
run's listing in visibility, each with and without each setting (docs/benchmarks.md, "The
engine's settings"); only those that moved a figure are here. The outbound and archival
queues' limits moved nothing (Waystation starts no Nexus operation or callback, and the dev
server archives nothing). What they cost: idle, nothing measurable (the idle server used
0.18–0.25 % of a core with and without them, 40 s each); busy, each queue reads as soon as a
task is written, in smaller batches, where the throttle gathered up to 50 ms of tasks in one
read: more reads of SQLite per task at high throughput.
"""

from __future__ import annotations

# The dev server's SQLite in WAL mode: the worker's frequent small writes do not block the
# Web UI's reads; `synchronous=normal` syncs at checkpoints, not at every commit (a power
# cut may lose the last commits of a dev machine, never corrupt the file).
SQLITE_PRAGMAS = {"journal_mode": "wal", "synchronous": "normal"}

# Values as the CLI's `--dynamic-config-value KEY=JSON` reads them (strings quoted).
ENGINE_SETTINGS = {
    # The workflow task after an activity, a signal or an Update is handed to matching by the
    # transfer queue: throttled, a chain of empty activities took 50 ms an activity instead
    # of 8–13, its workflow tasks waiting 40 ms each. Costs reads (see above).
    "history.transferProcessorMaxPollRPS": "10000",
    # A timer within this much of now is pushed out to it (1 s by default): a 1 ms timer
    # fired a second late (and so would a short retry backoff), 2 ms late with it. Costs: the
    # timer queue reads for each short timer; after a failed read, it retries 1 ms later
    # instead of 1 s.
    "history.timerProcessorMaxTimeShift": '"1ms"',
    # With the shift short, each timer is a read of the timer queue: throttled, timers of
    # 100 ms in a row fired 90–140 ms late instead of 2 ms. Alone it moves nothing.
    "history.timerProcessorMaxPollRPS": "10000",
    # Runs' visibility records (the Web UI's list, `waystation runs`, search attributes):
    # throttled, a run finished was listed as completed 8–40 ms later instead of 1–2 ms.
    "history.visibilityProcessorMaxPollRPS": "10000",
}


def dev_server_args(engine: dict[str, str] = ENGINE_SETTINGS) -> list[str]:
    """The flags after `temporal server start-dev`; `engine={}` gives the throttled defaults
    (bench/bench_engine.py's baseline)."""
    args: list[str] = []
    for pragma, value in SQLITE_PRAGMAS.items():
        args += ["--sqlite-pragma", f"{pragma}={value}"]
    for key, value in engine.items():
        args += ["--dynamic-config-value", f"{key}={value}"]
    return args


DEV_SERVER_ARGS = dev_server_args()
