"""The real `@ag-ui/client` HttpAgent (Node, installed from npm by
scripts/install-system-packages into tests/node/) against the live API: a validation run to its
first interrupt, resumed to the next; the planner through a tool approval with an edit and a
next message; a stream dropped mid-way and resumed by Last-Event-ID (tests/node/ag_ui_client.mjs).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from tests.helpers import live_api
from waystation.api.auth import issue_token

SECRET = "ag-ui-node-secret-0123456789-0123456789-abc"
NODE_TESTS = Path(__file__).resolve().parents[1] / "node"
SCRIPT_TIMEOUT = 240


async def test_http_agent_drives_runs_through_interrupts(migrated_url, dev_env, pool,
                                                         task_queue):
    node = shutil.which("node")
    assert node, "node is needed (Node 20; see scripts/install-system-packages)"
    assert (NODE_TESTS / "node_modules" / "@ag-ui" / "client").is_dir(), \
        "run scripts/install-system-packages: it installs tests/node's packages with npm ci"
    async with live_api(migrated_url, dev_env, pool, task_queue, secret=SECRET,
                        sse_heartbeat_seconds=1.0) as api:
        process = await asyncio.create_subprocess_exec(
            node, str(NODE_TESTS / "ag_ui_client.mjs"), cwd=NODE_TESTS,
            env={**os.environ, "WAYSTATION_URL": api.url,
                 "WAYSTATION_TOKEN": issue_token(SECRET, "nadia")},  # type: ignore[arg-type]
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), SCRIPT_TIMEOUT)
    report = out.decode() + err.decode()
    assert process.returncode == 0, report
    assert report.count("\n") >= 3 and "reconnect: dropped after" in report, report
