"""A backend for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, ...).

Answers are streamed, so a long answer reports progress while the model writes (throttled);
the last chunk's usage gives the tokens (`stream_options.include_usage`) and the price book
the cost. A structured task sends its JSON Schema as `response_format` (strict); a server that
refuses that gets the schema in the prompt instead, from then on. An invalid answer is asked
again once, with the validation error; still invalid, the task fails naming the field.

Errors are classified for Temporal's retries: 429, 5xx, timeouts and dropped connections are
retryable and honour `Retry-After` (`next_retry_delay`); 400, 401, 403, 404 and other
refusals are not, with a message that says what to check.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from waystation.activities.agents.base import (
    INVALID_OUTPUT,
    MODEL_REFUSED,
    MODEL_UNAVAILABLE,
    AgentRequest,
    AgentResponse,
    ModelCallFailed,
    ProgressReporter,
    Usage,
)
from waystation.activities.agents.prices import PriceBook
from waystation.activities.agents.structured import (
    AnswerProblem,
    extract_json_object,
    read_answer,
    strict_schema,
)

# Statuses worth trying again: rate limits, overload, server trouble, request timeouts.
RETRYABLE_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
# A Retry-After beyond this is not waited out in one go (the retry policy tries again).
MAX_RETRY_AFTER = timedelta(minutes=10)
_HINTS = {401: "check WAYSTATION_OPENAI_API_KEY", 403: "check the key's permissions",
          404: "check WAYSTATION_OPENAI_BASE_URL and the model name"}


class _SchemaRefused(Exception):
    """The server answered 400 to a `json_schema` response format."""


class OpenAICompatibleBackend:
    name = "openai"
    # A call goes over the network and may take minutes: a regular, heartbeating activity.
    in_place = False

    def __init__(self, *, base_url: str, api_key: str | None, model: str,
                 prices: PriceBook | None = None, timeout_seconds: float = 120.0,
                 progress_every_seconds: float = 1.0) -> None:
        self._model = model
        self._prices = prices or PriceBook()
        self._progress_every = progress_every_seconds
        # Learnt once per server: it refused `json_schema`, so the schema goes in the prompt.
        self._schema_refused = False
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers,
            timeout=httpx.Timeout(timeout_seconds, connect=10.0))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        messages = self._messages(request)
        text, spent, response_id = await self._call(request, messages, progress, Usage())
        output: dict[str, Any] | None = None
        if request.output_schema is None:
            try:  # a free-text answer may still hold fields a later step can use
                output = extract_json_object(text)
            except AnswerProblem:
                output = None
        else:
            try:
                output = read_answer(text, request.output_schema)
            except AnswerProblem as problem:
                messages += [{"role": "assistant", "content": text},
                             {"role": "user", "content": _reask(problem)}]
                text, spent, response_id = await self._call(request, messages, progress,
                                                            spent)
                try:
                    output = read_answer(text, request.output_schema)
                except AnswerProblem as again:
                    raise ModelCallFailed(
                        f"{request.task}: the model's answer is invalid after one re-ask: "
                        f"{again}", type=INVALID_OUTPUT, non_retryable=True,
                        usage=spent) from None
        return AgentResponse(output=output, text=text, input_tokens=spent.input_tokens,
                             output_tokens=spent.output_tokens, cost_usd=spent.cost_usd,
                             model=spent.model, session_id=response_id)

    # --- one request -------------------------------------------------------------------------

    async def _call(self, request: AgentRequest, messages: list[dict[str, str]],
                    progress: ProgressReporter | None,
                    spent: Usage) -> tuple[str, Usage, str | None]:
        """One completion; returns its text, `spent` plus its usage, and its id."""
        native = request.output_schema is not None and not self._schema_refused
        try:
            return await self._stream(request, messages, progress, spent, native)
        except _SchemaRefused:
            self._schema_refused = True
            return await self._stream(request, self._messages(request), progress, spent, False)

    async def _stream(self, request: AgentRequest, messages: list[dict[str, str]],
                      progress: ProgressReporter | None, spent: Usage,
                      native: bool) -> tuple[str, Usage, str | None]:
        model = request.model or self._model
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": True,
                                "stream_options": {"include_usage": True}}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if native and request.output_schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.schema_name, "schema": strict_schema(request.output_schema),
                "strict": True}}
        reader = _StreamReader(progress, self._progress_every)
        try:
            async with self._client.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    if response.status_code == 400 and "response_format" in body:
                        raise _SchemaRefused
                    raise _http_error(response, spent)
                if response.headers.get("content-type", "").startswith("application/json"):
                    await reader.whole(json.loads(await response.aread()))
                else:
                    async for line in response.aiter_lines():
                        if not await reader.line(line):
                            break
        except httpx.TimeoutException as error:
            raise ModelCallFailed(f"the model server timed out ({type(error).__name__})",
                                  type=MODEL_UNAVAILABLE, usage=spent) from None
        except httpx.TransportError as error:
            raise ModelCallFailed(f"the model server could not be reached: {error}",
                                  type=MODEL_UNAVAILABLE, usage=spent) from None
        if reader.error is not None:
            raise ModelCallFailed(f"the model server failed mid-answer: {reader.error}",
                                  type=MODEL_UNAVAILABLE, usage=spent)
        used_model = reader.model or model
        cost = self._prices.cost_usd(used_model, reader.input_tokens, reader.output_tokens)
        return reader.text(), spent + Usage(input_tokens=reader.input_tokens,
                                            output_tokens=reader.output_tokens, cost_usd=cost,
                                            model=used_model), reader.response_id

    def _messages(self, request: AgentRequest) -> list[dict[str, str]]:
        system = request.system or f"You are the {request.agent} of the {request.crew} crew."
        if request.output_schema is not None:
            system += "\n\nAnswer with one JSON object only."
            if self._schema_refused:
                system += (" It must match this JSON Schema:\n"
                           + json.dumps(request.output_schema, indent=1))
        user = request.instructions
        if request.context:
            user += "\n\n## Context\n\n" + json.dumps(request.context, indent=1, default=str)
        if request.feedback:
            user += "\n\n## Feedback from the human reviewer\n\n" + request.feedback
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]


class _StreamReader:
    """Collects a streamed answer and its usage, and reports progress now and then."""

    def __init__(self, progress: ProgressReporter | None, every: float) -> None:
        self._parts: list[str] = []
        self._chars = 0
        self._progress = progress
        self._every = every
        self._last_report = time.monotonic()
        self._last_pct = 0
        self.input_tokens = self.output_tokens = 0
        self.model = ""
        # The completion's id (every chunk of a stream carries it).
        self.response_id: str | None = None
        self.error: str | None = None

    def text(self) -> str:
        return "".join(self._parts)

    async def line(self, line: str) -> bool:
        """Take one SSE line; False once the stream is done."""
        if not line.startswith("data:"):
            return True
        data = line[5:].strip()
        if data == "[DONE]":
            return False
        await self.whole(json.loads(data))
        return self.error is None

    async def whole(self, chunk: dict[str, Any]) -> None:
        if "error" in chunk:
            self.error = str(chunk["error"].get("message", chunk["error"])
                             if isinstance(chunk["error"], dict) else chunk["error"])
            return
        self.model = chunk.get("model") or self.model
        self.response_id = chunk.get("id") or self.response_id
        if usage := chunk.get("usage"):
            self.input_tokens = int(usage.get("prompt_tokens") or 0)
            self.output_tokens = int(usage.get("completion_tokens") or 0)
        for choice in chunk.get("choices") or []:
            part = (choice.get("delta") or choice.get("message") or {}).get("content")
            if part:
                self._parts.append(part)
                self._chars += len(part)
        await self._report()

    async def _report(self) -> None:
        if self._progress is None or time.monotonic() - self._last_report < self._every:
            return
        # The length of the answer is unknown: approach 95 % as it grows.
        pct = min(95, 100 * self._chars // (self._chars + 2000))
        if pct > self._last_pct:
            self._last_report, self._last_pct = time.monotonic(), pct
            await self._progress(pct, f"writing ({self._chars} characters so far)")


def _reask(problem: AnswerProblem) -> str:
    return (f"Your answer could not be used: {problem}. Answer again with one JSON object "
            "that matches the schema exactly, and nothing else.")


def _http_error(response: httpx.Response, spent: Usage) -> ModelCallFailed:
    status = response.status_code
    try:
        detail = response.json().get("error", {})
        message = detail.get("message") if isinstance(detail, dict) else str(detail)
    except (ValueError, AttributeError):
        message = response.text[:300]
    what = f"HTTP {status} {response.reason_phrase}: {message or 'no message'}"
    if status in RETRYABLE_STATUSES:
        return ModelCallFailed(f"the model server answered {what}", type=MODEL_UNAVAILABLE,
                               usage=spent, next_retry_delay=retry_after(response))
    hint = f" ({_HINTS[status]})" if status in _HINTS else ""
    return ModelCallFailed(f"the model server refused the request: {what}{hint}",
                           type=MODEL_REFUSED, usage=spent, non_retryable=True)


def retry_after(response: httpx.Response) -> timedelta | None:
    """The wait a server asked for (`retry-after-ms`, or `Retry-After` seconds or date)."""
    headers = response.headers
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            delay = timedelta(milliseconds=float(ms))
        elif (value := headers.get("retry-after")) is not None:
            if value.strip().replace(".", "", 1).isdigit():
                delay = timedelta(seconds=float(value))
            else:
                delay = parsedate_to_datetime(value) - datetime.now(UTC)
        else:
            return None
    except (ValueError, TypeError):
        return None
    return min(max(delay, timedelta(0)), MAX_RETRY_AFTER)
