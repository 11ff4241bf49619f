"""`waystation api` as a child process, for tests that signal it or read what it prints."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.fault_helpers import SECRET, free_port

ROOT = Path(__file__).resolve().parent.parent


class ApiProcess:
    """One `python -m waystation api` on a port of its own (kept across restarts)."""

    def __init__(self, database_url: str, temporal_address: str, log_dir: Path,
                 **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_dir = log_dir
        self.env = {**os.environ, "DATABASE_URL": database_url,
                    "TEMPORAL_ADDRESS": temporal_address, "WAYSTATION_JWT_SECRET": SECRET,
                    "WAYSTATION_API_HOST": "127.0.0.1", "WAYSTATION_API_PORT": str(self.port),
                    "WAYSTATION_OTEL_EXPORTER": "none", **env}
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def log_path(self) -> Path:
        """What the process wrote to stderr (its log); stdout goes to `.out` beside it."""
        return self.log_dir / f"api-{self.starts}.log"

    def start(self, timeout: float = 60.0) -> None:
        self.starts += 1
        with self.log_path.open("wb") as log, self.log_path.with_suffix(".out").open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "waystation", "api"], cwd=ROOT,
                                         env=self.env, stdout=out, stderr=log)
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"the API exited:\n{self.logs()}"
            try:
                if httpx.get(f"{self.url}/livez", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"the API never served:\n{self.logs()}"
            # Synchronous on purpose (callers in plain and async tests start the process alike);
            # `eventually` is a coroutine.
            time.sleep(0.1)

    def terminate(self) -> float:
        """SIGTERM; the seconds until the process has exited (at most 30, then killed)."""
        assert self.proc is not None
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return time.monotonic() - began

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.terminate()

    def stderr_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def logs(self) -> str:
        out = self.log_path.with_suffix(".out").read_text(errors="replace")
        return (self.stderr_text()[-4000:] + "\n--- stdout ---\n" + out[-2000:]).strip()
