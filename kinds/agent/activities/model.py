"""The model an agent run uses when its input names none: the worker's configuration.

An agent that carries the `ConfiguredModel()` capability follows WAYSTATION_AGENT_BACKEND like
the other kinds: with `openai` its requests go to a PydanticAI OpenAI chat model built from
WAYSTATION_OPENAI_BASE_URL / _API_KEY / _MODEL / _TIMEOUT_SECONDS; with any other backend it
keeps its own model (the planner's offline one). The workflow names the model by the string
`CONFIGURED_MODEL`, which crosses into the model-request activity as that string (a `Model`
instance cannot cross) and is resolved there, on the worker, by this capability; so the settings
read are the worker's, and a worker restarted with other settings sends the next request to
the new endpoint.

The same capability prices and counts each of the agent's requests by the worker's settings
(waystation.kinds.agent.activities.metering).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import leaf_capabilities
from pydantic_ai.models import Model, ModelResolutionContext, infer_model
from temporalio.common import RetryPolicy

from waystation.kinds.agent.activities.metering import PricedModel

if TYPE_CHECKING:
    from openai import AsyncOpenAI

CONFIGURED_MODEL = "waystation:configured"
# Model requests' retries, for an agent's `TemporalDurability(model_activity_config=...)`: a
# 429, a 5xx, a timeout or a lost connection is retried with the crew tasks' backoff (2 s
# doubling to a minute; a 429's Retry-After replaces it, up to that minute) for ten attempts
# (about five minutes), then the run fails with `agent_error`. A heartbeat missed by a dying
# worker uses an attempt too. What another attempt cannot fix (400, 401, 403, 404, an
# exhausted quota) PydanticAI does not retry at all (its `non_retryable_model_errors`).
MODEL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                          maximum_interval=timedelta(seconds=60), maximum_attempts=10)


@dataclass(frozen=True)
class OpenAIModelConfig:
    """An OpenAI-compatible chat-completions endpoint (the WAYSTATION_OPENAI_* settings)."""

    base_url: str
    api_key: str | None
    model: str
    timeout_seconds: float


# Set once by the worker as it starts (`use_openai_model`); None keeps each agent's own model.
_openai: OpenAIModelConfig | None = None


def use_openai_model(config: OpenAIModelConfig | None) -> None:
    global _openai
    _openai = config


def model_config(settings: Any) -> OpenAIModelConfig | None:
    """The OpenAI-compatible model agent runs use when their input names none (agents with
    `ConfiguredModel()`), from the worker's `Settings`, with the backend `openai`; None keeps
    each agent's own model."""
    if settings.agent_backend != "openai":
        return None
    return OpenAIModelConfig(base_url=settings.openai_base_url, api_key=settings.openai_api_key,
                             model=settings.openai_model,
                             timeout_seconds=settings.openai_timeout_seconds)


def configured_openai_model() -> OpenAIModelConfig | None:
    """The worker's configured endpoint, for agents of other frameworks (a LangGraph node's
    model: waystation.kinds.agent.activities.langgraph)."""
    return _openai


def _chat_model(config: OpenAIModelConfig) -> Model:
    # Imported here: the OpenAI SDK is large, and only a worker configured for it needs it.
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(config.model, provider=OpenAIProvider(openai_client=_client(config)))


@functools.lru_cache(maxsize=8)
def _client(config: OpenAIModelConfig) -> AsyncOpenAI:
    """One client per configuration for the process: building one loads the TLS trust store
    (tens of milliseconds), and a model is built for every request, in the workflow too. The
    provider does not own it, so no request's end closes it."""
    from openai import AsyncOpenAI

    # The SDK does not retry (max_retries 0): a 429 or a 5xx fails the activity and Temporal
    # retries it, waiting what the server's Retry-After asked for, with every attempt in the
    # run's history.
    return AsyncOpenAI(base_url=config.base_url, api_key=config.api_key or "api-key-not-set",
                       timeout=config.timeout_seconds, max_retries=0)


class ConfiguredModel(AbstractCapability[Any]):
    """Resolves `CONFIGURED_MODEL` to the worker's configured model (see the module)."""

    async def resolve_model_id(self, ctx: ModelResolutionContext[Any], *,
                               model_id: str) -> Model | None:
        if model_id != CONFIGURED_MODEL:
            return None
        if _openai is not None:
            return _chat_model(_openai)
        own = ctx.agent.model
        assert own is not None, "an agent registered for runs has a model of its own"
        return infer_model(own)

    def get_wrapper_model(self, model: Model) -> Model | None:
        # Every request, the agent's own model's too, is priced and counted by the worker's
        # table and meter (waystation.kinds.agent.activities.metering).
        return PricedModel(model)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None


def follows_configuration(agent: Any) -> bool:
    """Whether the agent carries `ConfiguredModel()`, so it may be given `CONFIGURED_MODEL`."""
    return any(isinstance(c, ConfiguredModel) for c in leaf_capabilities(agent.root_capability))
