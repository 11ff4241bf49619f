"""`waystation up` end to end: starts healthy, restarts a killed worker, stops cleanly.

Runs the real thing (Temporal dev server binary, embedded PostgreSQL, worker and API child
processes) as a subprocess, the way a developer would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from waystation.cli import apply_flags_to_env, build_parser
from waystation.devstack import (
    STATE_FILE_NAME,
    DevStackError,
    check_ports_free,
    redact_password,
    temporal_argv,
)
from waystation.settings import Settings
from waystation.testing import free_port

STARTUP_TIMEOUT_S = 90.0
SHUTDOWN_TIMEOUT_S = 30.0


def _wait_for(what: str, check: Callable[[], Any], timeout: float, proc: subprocess.Popen) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"`waystation up` exited ({proc.returncode}) while {what}"
        result = check()
        if result:
            return result
        # Synchronous on purpose: `waystation up` is driven as a child process from a plain test,
        # and `eventually` is a coroutine.
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


def _healthz(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _state(data_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((data_dir / STATE_FILE_NAME).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _processes_using(data_dir: Path) -> list[psutil.Process]:
    """Every live process whose command line mentions the data folder (temporal, postgres)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if str(data_dir) in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path, str]]:
    # Short path: Postgres puts its unix socket in pgdata, and socket paths max out at ~107 bytes.
    data_dir = Path(tempfile.mkdtemp(prefix="ws-up-"))
    api_port, temporal_port, ui_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        WAYSTATION_DATA_DIR=str(data_dir),
        WAYSTATION_API_HOST="127.0.0.1",
        WAYSTATION_API_PORT=str(api_port),
        TEMPORAL_ADDRESS=f"127.0.0.1:{temporal_port}",
        TEMPORAL_UI_PORT=str(ui_port),
        TEMPORAL_NAMESPACE="default",
        PYTHONUNBUFFERED="1",
    )
    log_path = tmp_path / "up.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "waystation", "up"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc, data_dir, f"http://127.0.0.1:{api_port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
        # Never leave servers behind, even when the test failed half-way.
        for leftover in _processes_using(data_dir):
            leftover.kill()
        print(log_path.read_text(errors="replace")[-5000:])
        shutil.rmtree(data_dir, ignore_errors=True)


def _settings(**env: str) -> Settings:
    return Settings.model_validate(env)


@pytest.mark.parametrize(
    "argv",
    [
        ["--data-dir", "/d", "--temporal-port", "17001", "up"],
        ["up", "--data-dir", "/d", "--temporal-port", "17001"],
    ],
)
def test_flags_before_or_after_the_subcommand_become_env(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAYSTATION_DATA_DIR", raising=False)
    monkeypatch.setenv("TEMPORAL_ADDRESS", "localhost:7233")
    apply_flags_to_env(build_parser({}).parse_args(argv))
    assert os.environ["WAYSTATION_DATA_DIR"] == "/d"
    assert os.environ["TEMPORAL_ADDRESS"] == "localhost:17001"


def test_dev_server_command_line(tmp_path: Path) -> None:
    settings = _settings(
        WAYSTATION_DATA_DIR=str(tmp_path),
        TEMPORAL_ADDRESS="127.0.0.1:17002",
        TEMPORAL_UI_PORT="18002",
    )
    argv = temporal_argv(settings, Path("/bin/temporal"))
    joined = " ".join(argv)
    assert "--port 17002 --ui-port 18002" in joined
    assert f"--db-filename {tmp_path / 'temporal.sqlite'}" in joined
    for spec in ("WaystationKind=Keyword", "WaystationPhase=Int", "WaystationAwaitingHuman=Bool"):
        assert f"--search-attribute {spec}" in joined


def test_taken_temporal_port_fails_with_a_clear_message() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        settings = _settings(
            TEMPORAL_ADDRESS=f"127.0.0.1:{port}",
            TEMPORAL_UI_PORT=str(free_port()),
            WAYSTATION_API_PORT=str(free_port()),
        )
        expected = f"port {port} \\(Temporal gRPC\\) is already in use"
        with pytest.raises(DevStackError, match=expected):
            check_ports_free(settings)


def test_printed_database_url_hides_the_password() -> None:
    assert redact_password("postgresql://u:pw@db/x") == "postgresql://u:***@db/x"
    embedded = "postgresql://postgres:@/postgres?host=/tmp/p"
    assert redact_password(embedded) == embedded


@pytest.mark.slow
def test_up_restarts_killed_worker_and_stops_cleanly(
    stack: tuple[subprocess.Popen, Path, str],
) -> None:
    proc, data_dir, api_url = stack

    _wait_for("/healthz", lambda: _healthz(api_url), STARTUP_TIMEOUT_S, proc)
    state = _wait_for(
        "the state file to report `up`",
        lambda: (s := _state(data_dir)).get("status") == "up" and s,
        STARTUP_TIMEOUT_S,
        proc,
    )
    assert state["pid"] == proc.pid
    assert state["urls"]["api"] == api_url
    running = " ".join(" ".join(p.cmdline()) for p in _processes_using(data_dir))
    assert "temporal" in running and "postgres" in running, running

    worker_pid = state["worker_pid"]
    worker = psutil.Process(worker_pid)
    assert worker.ppid() == proc.pid
    assert "worker" in worker.cmdline()

    os.kill(worker_pid, signal.SIGKILL)

    def replacement_worker() -> int | None:
        pid = _state(data_dir).get("worker_pid")
        if pid and pid != worker_pid and psutil.pid_exists(pid):
            return pid
        return None

    new_pid = _wait_for("a new worker process", replacement_worker, 30.0, proc)
    new_worker = psutil.Process(new_pid)
    assert new_worker.ppid() == proc.pid
    assert "worker" in new_worker.cmdline()
    assert _healthz(api_url), "the API should be unaffected by the worker's death"
    _demo_reaches_a_gate_and_a_decision_moves_it_on(data_dir, api_url)

    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(SHUTDOWN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`waystation up` did not exit within {SHUTDOWN_TIMEOUT_S:.0f}s of SIGINT")
    assert code == 0

    # Postgres may take a moment to reap its own backends after pg_ctl stop returns.
    deadline = time.monotonic() + 10
    while _processes_using(data_dir) and time.monotonic() < deadline:
        # A synchronous test (see _wait_for): polls the process table, which has no event to await.
        time.sleep(0.5)
    assert not _processes_using(data_dir), "temporal/postgres processes outlived `up`"
    assert not psutil.pid_exists(new_pid) or psutil.Process(new_pid).status() == "zombie"
    assert not (data_dir / STATE_FILE_NAME).exists()
    # State that must survive a restart stays on disk.
    assert (data_dir / "temporal.sqlite").exists()
    assert (data_dir / "pgdata").is_dir()


def _demo_reaches_a_gate_and_a_decision_moves_it_on(data_dir: Path, api_url: str) -> None:
    """`waystation demo` follows the run's stream to its first gate; deciding it with a dev
    token moves the run on to the next one. Given only the data folder, it finds the stack's
    API and Web UI on the ports `up` was given (its state file)."""
    env = {**os.environ, "WAYSTATION_DATA_DIR": str(data_dir)}
    demo = subprocess.run([sys.executable, "-m", "waystation", "demo"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    ui = _state(data_dir)["urls"]["temporal_ui"]
    assert f"Temporal Web UI: {ui}/namespaces/default/workflows/validation-" in demo.stdout
    assert f"Events:          {api_url}/runs/" in demo.stdout
    assert "gate.opened" in demo.stdout and "task.completed" in demo.stdout, demo.stdout
    assert "Checkpoint:      approve_founders_brief" in demo.stdout, demo.stdout
    run_id = demo.stdout.split("Run id:", 1)[1].split()[0]
    token = subprocess.run([sys.executable, "-m", "waystation", "token", "--user", "dev"],
                           env=env, capture_output=True, text=True, check=True).stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    decided = httpx.post(f"{api_url}/runs/{run_id}/decisions/approve_founders_brief",
                         headers=headers, json={"decision": "approve"}, timeout=30)
    assert decided.status_code == 200, decided.text

    def at_next_gate() -> bool:
        run = httpx.get(f"{api_url}/runs/{run_id}", headers=headers, timeout=5).json()
        return run["pending_checkpoint"] == "approve_vpc_completion"
    deadline = time.monotonic() + 60
    while not at_next_gate():
        assert time.monotonic() < deadline, "the run did not reach its second gate"
        # A synchronous test (see _wait_for): polls the API from outside the stack.
        time.sleep(0.5)
