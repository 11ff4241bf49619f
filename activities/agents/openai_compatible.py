"""A backend for any OpenAI-compatible chat-completions endpoint, asking for a JSON object."""

from __future__ import annotations

import json

import httpx

from activities.agents.base import AgentRequest, AgentResponse, ProgressReporter


class OpenAICompatibleBackend:
    name = "openai"

    def __init__(self, *, base_url: str, api_key: str | None, model: str) -> None:
        self._model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=120)

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        system = (f"You are the {request.agent} of the {request.crew} crew. "
                  "Answer with one JSON object only.")
        user = json.dumps({"task": request.task, "instructions": request.instructions,
                           "context": request.context, "feedback": request.feedback})
        response = await self._client.post("/chat/completions", json={
            "model": self._model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "response_format": {"type": "json_object"},
        })
        response.raise_for_status()
        body = response.json()
        usage = body.get("usage", {})
        return AgentResponse(
            output=json.loads(body["choices"][0]["message"]["content"]),
            input_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
            model=body.get("model", self._model),
        )
