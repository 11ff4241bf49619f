"""A real HTTP server on a free local port, served from a thread for a `with` block: the base
of the tests' stand-ins for what lies outside (a webhook receiver, Slack's Web API)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that keeps the test output clean and answers in one call."""

    def answer(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


class LocalServer:
    """Serves `handler()`'s requests while entered; `url` is the server's with `path`."""

    path = "/"
    url: str = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.url = f"http://127.0.0.1:{self._server.server_port}{self.path}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
