"""A real local HTTP server that receives webhooks, failing the first N requests (with
`fail_status` and `fail_body`), each answered after `delay_seconds`; `most_at_once` is how many
it was ever answering at the same time."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    answered: int


@dataclass
class Receiver:
    fail_first: int = 0
    fail_status: int = 500
    fail_body: bytes = b""
    received: list[Received] = field(default_factory=list)
    url: str = ""
    delay_seconds: float = 0.0
    most_at_once: int = 0
    _at_once: int = 0

    def __enter__(self) -> Receiver:
        receiver = self
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver._lock:
                    receiver._at_once += 1
                    receiver.most_at_once = max(receiver.most_at_once, receiver._at_once)
                time.sleep(receiver.delay_seconds)
                with receiver._lock:
                    receiver._at_once -= 1
                failing = len(receiver.received) < receiver.fail_first
                status = receiver.fail_status if failing else 204
                answer = receiver.fail_body if failing else b""
                receiver.received.append(Received(
                    headers={k.lower(): v for k, v in self.headers.items()}, body=body,
                    answered=status))
                self.send_response(status)
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
