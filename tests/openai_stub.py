"""A local OpenAI-compatible chat-completions server: the paid model's stand-in in tests.

It speaks the real protocol over real HTTP (uvicorn): `POST /v1/chat/completions` with SSE
streaming chunks (`stream_options.include_usage` gives a last chunk with usage), or one JSON
body without `stream`; `response_format` `json_schema` answers are built from the schema.
Tests script what the next requests get (per task, by the schema's name): an answer text
(fenced JSON, prose, an invalid object), a tool call (`finish_reason` `tool_calls`), an HTTP
error with `Retry-After`, a refusal of `json_schema`, or a stream cut mid-answer (`Cut`: the
connection dropped after some of the answer, as a provider's outage does). Streams go a word (a
tool call's arguments: 16 characters) a chunk, `chunk_delay` apart (default 5 ms: a model's
cadence). Every request is recorded.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fault_helpers import free_port
from tests.helpers import eventually
from waystation.activities.agents.schema_example import example_for


@dataclass
class Reply:
    """Answer with this text."""

    text: str


@dataclass
class Fail:
    """Answer with an HTTP error (a `Retry-After` header when given)."""

    status: int
    retry_after: float | None = None
    message: str = "scripted failure"


@dataclass
class CallTool:
    """Answer with a call of this tool (the chat-completions `tool_calls` shape)."""

    name: str
    arguments: dict[str, Any]
    call_id: str = "call_1"

    def message(self) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": self.call_id, "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)}}]}


@dataclass
class Cut:
    """Stream the first `after` characters of `text`, then drop the connection mid-answer."""

    text: str
    after: int


@dataclass
class RefuseSchema:
    """Answer 400 when the request asks for a `json_schema` response format."""


@dataclass
class Stall:
    """Answer only after this long (past a client's timeout), then with the default text."""

    seconds: float


Scripted = Reply | CallTool | Fail | RefuseSchema | Stall | Cut


@dataclass
class Recorded:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float

    @property
    def task(self) -> str | None:
        fmt = self.body.get("response_format") or {}
        return (fmt.get("json_schema") or {}).get("name")

    @property
    def user_text(self) -> str:
        return "\n".join(m["content"] for m in self.body["messages"] if m["role"] == "user")

    @property
    def tool_results(self) -> list[str]:
        return [m["content"] for m in self.body["messages"] if m["role"] == "tool"]

    @property
    def system_text(self) -> str:
        return "\n".join(m["content"] for m in self.body["messages"] if m["role"] == "system")


@dataclass
class OpenAIStub:
    """Start with `await stub.start()`; `stub.base_url` goes to the backend."""

    chunk_delay: float = 0.005
    # Answers to requests nothing is scripted for: (recorded request) -> text.
    default_text: Any = None
    requests: list[Recorded] = field(default_factory=list)
    # When each streamed answer's first text chunk was sent (time.monotonic()): the model's own
    # first token, which bench/bench_tokens.py compares a client's with.
    first_tokens: list[float] = field(default_factory=list)
    last_tokens: list[float] = field(default_factory=list)  # and its last
    _scripts: dict[str | None, list[Scripted]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task | None = None

    def script(self, *items: Scripted, task: str | None = None) -> None:
        """Queue what the next requests (of `task`, or any) get, in order."""
        self._scripts.setdefault(task, []).extend(items)

    def of_task(self, task: str) -> list[Recorded]:
        return [r for r in self.requests if r.task == task]

    async def start(self) -> None:
        app = Starlette(routes=[Route("/v1/chat/completions", self._complete,
                                      methods=["POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="off")
        server = self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(server.serve())
        await eventually(lambda: asyncio.sleep(0, server.started), timeout=30)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task

    # --- the endpoint --------------------------------------------------------------------

    def _next(self, recorded: Recorded) -> Scripted | None:
        for key in (recorded.task, None):
            queue = self._scripts.get(key)
            while queue:
                item = queue.pop(0)
                if isinstance(item, RefuseSchema) and "response_format" not in recorded.body:
                    continue  # the refusal is spent once the client stopped asking for it
                return item
        return None

    async def _complete(self, request: Request) -> Response:
        body = await request.json()
        recorded = Recorded(body=body, headers=dict(request.headers), at=time.time())
        self.requests.append(recorded)
        item = self._next(recorded)
        if isinstance(item, Fail):
            headers = {} if item.retry_after is None else {"Retry-After": str(item.retry_after)}
            return JSONResponse({"error": {"message": item.message, "type": "scripted"}},
                                status_code=item.status, headers=headers)
        if isinstance(item, Stall):
            # A scripted stall of the stub server: the behaviour being simulated.
            await asyncio.sleep(item.seconds)
            item = None
        if isinstance(item, RefuseSchema):
            return JSONResponse({"error": {"message": "response_format json_schema is not "
                                                      "supported", "type": "invalid_request"}},
                                status_code=400)
        if isinstance(item, CallTool):
            message = item.message()
            text = message["tool_calls"][0]["function"]["arguments"]
        else:
            text = item.text if isinstance(item, Reply | Cut) else self._default(recorded)
            message = {"role": "assistant", "content": text}
        usage = {"prompt_tokens": len(json.dumps(body["messages"])) // 4,
                 "completion_tokens": len(text) // 4 + 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        model = body.get("model", "stub")
        if isinstance(item, CallTool) and not body.get("stream"):
            return JSONResponse({"id": "cmpl-stub", "object": "chat.completion", "model": model,
                                 "choices": [{"index": 0, "finish_reason": "tool_calls",
                                              "message": message}], "usage": usage})
        if not body.get("stream"):
            return JSONResponse({"id": "cmpl-stub", "object": "chat.completion", "model": model,
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": message}],
                                 "usage": usage})
        with_usage = (body.get("stream_options") or {}).get("include_usage", False)
        return StreamingResponse(self._chunks(model, item, text, usage if with_usage else None),
                                 media_type="text/event-stream")

    async def _chunks(self, model: str, item: Scripted | None, text: str,
                      usage: dict[str, int] | None) -> AsyncIterator[str]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return "data: " + json.dumps({
                "id": "cmpl-stub", "object": "chat.completion.chunk", "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

        if isinstance(item, CallTool):
            pieces = [text[start:start + 16] for start in range(0, len(text), 16)] or [""]
            deltas = [{"tool_calls": [{"index": 0, "function": {"arguments": piece},
                                       **({"id": item.call_id, "type": "function",
                                           "function": {"name": item.name,
                                                        "arguments": piece}}
                                          if i == 0 else {})}]}
                      for i, piece in enumerate(pieces)]
            finish = "tool_calls"
        else:
            deltas = [{"content": word} for word in re.findall(r"\S*\s*", text) if word]
            finish = "stop"
        yield chunk({"role": "assistant", "content": None if finish == "tool_calls" else ""})
        sent = 0
        for delta in deltas:
            if self.chunk_delay:
                # The stub's pace between streamed chunks: the behaviour being simulated.
                await asyncio.sleep(self.chunk_delay)
            if isinstance(item, Cut) and sent >= item.after:
                # The provider's connection drops mid-answer: the response ends unfinished.
                raise ConnectionAbortedError("scripted cut")
            if not sent and delta.get("content"):
                self.first_tokens.append(time.monotonic())
            sent += len(delta.get("content") or "")
            yield chunk(delta)
        if sent:
            self.last_tokens.append(time.monotonic())
        yield chunk({}, finish)
        if usage is not None:
            yield "data: " + json.dumps({"id": "cmpl-stub", "object": "chat.completion.chunk",
                                         "model": model, "choices": [], "usage": usage}) + "\n\n"
        yield "data: [DONE]\n\n"

    def _default(self, recorded: Recorded) -> str:
        if self.default_text is not None:
            return self.default_text(recorded)
        fmt = recorded.body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema")
        if schema is None:
            return "A plain answer."
        return json.dumps(example_for(schema))
