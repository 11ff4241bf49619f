"""The dev servers run with the engine's settings (waystation/engine_settings.py, issue 39):
the one `waystation up` starts and the one the fixtures start, read back from the running
server process's command line, and taking effect (an activity chain that a throttled server
holds up by about 50 ms a workflow task)."""

from __future__ import annotations

from pathlib import Path

import psutil
from temporalio.testing import WorkflowEnvironment

from waystation.devstack import STOP_TIMEOUT_S, start_temporal, terminate
from waystation.engine_check import DOCTOR_CHAIN, STALL_MS, run_chain
from waystation.engine_settings import ENGINE_SETTINGS, SQLITE_PRAGMAS
from waystation.settings import Settings
from waystation.testing import free_port


def _flags(cmdline: list[str], flag: str) -> dict[str, str]:
    """`flag KEY=VALUE` pairs of a command line, as a dict."""
    pairs = [value for name, value in zip(cmdline, cmdline[1:], strict=False) if name == flag]
    return dict(pair.split("=", 1) for pair in pairs)


def _assert_engine_settings(cmdline: list[str]) -> None:
    # The SDK adds dynamic config values of its own to the fixtures' servers.
    dynamic = _flags(cmdline, "--dynamic-config-value")
    assert {key: dynamic.get(key) for key in ENGINE_SETTINGS} == ENGINE_SETTINGS, cmdline
    assert _flags(cmdline, "--sqlite-pragma") == SQLITE_PRAGMAS, cmdline


def _server_of(env: WorkflowEnvironment) -> psutil.Process:
    """The dev server process a fixture started: this process's child on the client's port."""
    port = env.client.service_client.config.target_host.rpartition(":")[2]
    for child in psutil.Process().children(recursive=True):
        cmdline = child.cmdline()
        if "start-dev" in cmdline and cmdline[cmdline.index("--port") + 1] == port:
            return child
    raise AssertionError(f"no dev server child listening on port {port}")


async def test_the_fixtures_dev_server_runs_unthrottled(dev_env: WorkflowEnvironment) -> None:
    _assert_engine_settings(_server_of(dev_env).cmdline())
    chain = await run_chain(dev_env.client, DOCTOR_CHAIN)
    assert chain.median_wait_ms < STALL_MS, chain


async def test_the_dev_server_of_waystation_up_runs_with_the_engine_settings(
    tmp_path: Path,
) -> None:
    settings = Settings.model_validate({
        "WAYSTATION_DATA_DIR": str(tmp_path),
        "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
        "TEMPORAL_UI_PORT": str(free_port()),
    })
    # What `waystation up` runs first (devstack.run_devstack), returning once it serves.
    server = await start_temporal(settings, tmp_path)
    try:
        _assert_engine_settings(psutil.Process(server.pid).cmdline())
    finally:
        await terminate(server, "temporal", STOP_TIMEOUT_S)
