"""A real local HTTP server that receives webhooks, failing the first N requests (with
`fail_status` and `fail_body`), each answered after `delay_seconds`; `most_at_once` is how many
it was ever answering at the same time."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from tests.local_server import LocalServer, QuietHandler


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    answered: int


@dataclass
class Receiver(LocalServer):
    fail_first: int = 0
    fail_status: int = 500
    fail_body: bytes = b""
    received: list[Received] = field(default_factory=list)
    url: str = ""
    delay_seconds: float = 0.0
    most_at_once: int = 0
    _at_once: int = 0

    path = "/hook"

    def handler(self) -> type[QuietHandler]:
        receiver = self
        self._lock = threading.Lock()

        class Handler(QuietHandler):
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
                self.answer(status, answer)

        return Handler
