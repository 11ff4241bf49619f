"""One way to connect to Temporal, shared by the worker, the API, the dev stack and the CLI.

Everything that talks to Temporal must agree on the data converter (pydantic models on the
wire) and the search attributes, so both live here.
"""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from waystation.settings import Settings
from workflows import search_attributes

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
        data_converter=pydantic_data_converter,
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

