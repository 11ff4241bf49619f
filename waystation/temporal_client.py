"""One way to connect to Temporal, shared by the worker, the API, the dev stack and the CLI.

Everything that talks to Temporal must agree on the data converter (pydantic models on the
wire) and the search attributes, so both live here: every client, worker, replayer and test
environment uses `DATA_CONVERTER`, and no other.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pydantic
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from waystation.settings import Settings
from waystation.workflows import search_attributes

# The modules whose types the lenient fallback may build: the OpenAI Agents SDK's, the OpenAI
# client's and Temporal's OpenAI Agents integration's (its model activity's input and output).
_LENIENT_MODULES = ("agents.", "openai.", "temporalio.openai_agents.")


# One cache of type adapters for every converter of the process. Temporal gives each workflow
# run a converter of its own (its serialization context), whose cache starts empty: each run
# then built the adapters of its types anew (ModelResponse's alone about 16 ms, a tenth of an
# agent turn), inside its workflow tasks (issue 31). An adapter depends on the type only.
_TYPE_ADAPTERS = functools.lru_cache(maxsize=1024)(pydantic.TypeAdapter)


class _JSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """`temporalio.contrib.pydantic`'s JSON, byte for byte (no `exclude_unset`: a default
    changed in code must not change what in-flight runs replay), strict for every type but
    the OpenAI Agents SDK's.

    Temporal's OpenAI Agents integration hands its model activity the SDK's `TypedDict` items
    and OpenAI's response models, which strict validation refuses (they drift from what the
    API and the SDK build: optional fields sent as null, deprecated required ones missing).
    For those types only, a failed validation falls back to the integration's own lenient
    construction, as its `OpenAIPayloadConverter` does; the integration is imported then, so
    an installation without OpenAI agents never imports it (docs/agents.md, "OpenAI Agents
    SDK")."""

    def __init__(self) -> None:
        super().__init__()
        self._type_adapter = _TYPE_ADAPTERS

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._type_adapter = _TYPE_ADAPTERS

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        try:
            return super().from_payload(payload, type_hint)
        except pydantic.ValidationError:
            if not getattr(type_hint, "__module__", "").startswith(_LENIENT_MODULES):
                raise
            from temporalio.openai_agents._temporal_openai_agents import _lenient_construct

            return _lenient_construct(type_hint, json.loads(payload.data))


class PayloadConverter(CompositePayloadConverter):
    """The default converters, JSON replaced by `_JSONPayloadConverter`."""

    def __init__(self) -> None:
        json_converter = _JSONPayloadConverter()
        super().__init__(*(json_converter if isinstance(c, JSONPlainPayloadConverter) else c
                           for c in DefaultPayloadConverter.default_encoding_payload_converters))


# The one data converter of every process (API, worker, CLI, replayers, tests, benches).
DATA_CONVERTER = DataConverter(payload_converter_class=PayloadConverter)

# Workflows upsert these; the dev server registers them at start (see devstack.py).
SEARCH_ATTRIBUTES: tuple[SearchAttributeKey, ...] = search_attributes.ALL

# The dev server's --search-attribute flag spells types in CLI form.
_CLI_TYPE_NAMES = {
    "KEYWORD": "Keyword",
    "INT": "Int",
    "BOOL": "Bool",
    "TEXT": "Text",
    "DOUBLE": "Double",
    "DATETIME": "Datetime",
    "KEYWORD_LIST": "KeywordList",
}


def search_attribute_cli_specs() -> list[str]:
    """`Name=Type` strings for `temporal server start-dev --search-attribute`."""
    specs = []
    for key in SEARCH_ATTRIBUTES:
        type_name = key.indexed_value_type.name.removeprefix("INDEXED_VALUE_TYPE_")
        specs.append(f"{key.name}={_CLI_TYPE_NAMES[type_name]}")
    return specs


def _read(path: Path | None) -> bytes | None:
    return path.expanduser().read_bytes() if path is not None else None


def tls_config(settings: Settings) -> TLSConfig | bool:
    """False for plaintext (the dev server); a TLSConfig when any TLS setting is given."""
    if not (
        settings.temporal_tls
        or settings.temporal_tls_cert
        or settings.temporal_tls_key
        or settings.temporal_tls_ca
    ):
        # An API key without TLS settings means Temporal Cloud, which always needs TLS.
        return settings.temporal_api_key is not None
    return TLSConfig(
        server_root_ca_cert=_read(settings.temporal_tls_ca),
        client_cert=_read(settings.temporal_tls_cert),
        client_private_key=_read(settings.temporal_tls_key),
    )


async def connect_temporal(settings: Settings, *, runtime: Runtime | None = None) -> Client:
    """A client; `runtime` (see waystation.worker_metrics) when the worker serves metrics."""
    return await Client.connect(
        settings.temporal_address,
        runtime=runtime,
        namespace=settings.temporal_namespace,
        api_key=settings.temporal_api_key,
        tls=tls_config(settings),
        data_converter=DATA_CONVERTER,
        interceptors=[TracingInterceptor()],
    )


async def register_search_attributes(client: Client, namespace: str) -> None:
    """Register Waystation's search attributes (for servers started without them).

    Adding an attribute that exists with the same type is accepted by the servers we use, so
    this is safe to call at every start.
    """
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest

    await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
        namespace=namespace,
        search_attributes={key.name: key.indexed_value_type.value  # type: ignore[misc]
                           for key in SEARCH_ATTRIBUTES}))

