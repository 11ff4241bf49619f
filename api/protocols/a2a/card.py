"""The agent card: what Waystation offers an A2A client, at `/.well-known/agent-card.json`.

One skill per registered run kind. A2A 1.0's `AgentSkill` has no field for an input schema, so
each kind's input JSON Schema is written into its skill's description (what a model choosing a
skill reads) and travels, as JSON, in the card's one extension, `RUN_KINDS_EXTENSION`, under
`params.inputSchemas[<skill id>]` (an extension's params are the card's place for what the
protocol leaves to the agent). Authentication is the API's: a bearer JWT or an API key, both in
`Authorization: Bearer`, and with an identity provider configured its OpenID Connect discovery
document, whose tokens the API accepts.
"""

from __future__ import annotations

import json

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    OpenIdConnectSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol

from waystation.api.protocols.a2a.mapping import JSON, KIND_KEY, TEXT, default_kind, struct
from waystation.registry import Registry
from waystation.settings import Settings

CARD_PATH = "/.well-known/agent-card.json"
RPC_PATH = "/a2a"
RUN_KINDS_EXTENSION = "urn:waystation:a2a:run-kinds:v1"
VERSION = "0.1.0"  # as the API's OpenAPI document

SECURITY_SCHEMES = {
    "bearer": SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(
        scheme="Bearer", bearer_format="JWT",
        description="An HS256 JWT of this installation (`waystation token --user NAME`) or "
                    "an RS256/ES256 JWT of the configured identity provider.")),
    "apiKey": SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(
        scheme="Bearer", bearer_format="wsk_",
        description="An API key (`wsk_...`, POST /api-keys), sent as the bearer token.")),
}


def security_schemes(settings: Settings) -> dict[str, SecurityScheme]:
    """The API's: its bearer schemes, and the identity provider's discovery document when one
    is configured (`WAYSTATION_JWKS_URL`, `WAYSTATION_JWT_ISSUER`), as MCP's protected-resource
    metadata points at it."""
    if settings.jwks_url is None or settings.jwt_issuer is None:
        return SECURITY_SCHEMES
    discovery = settings.jwt_issuer.rstrip("/") + "/.well-known/openid-configuration"
    return {**SECURITY_SCHEMES, "openIdConnect": SecurityScheme(
        open_id_connect_security_scheme=OpenIdConnectSecurityScheme(
            open_id_connect_url=discovery,
            description="A JWT of the identity provider (its audience "
                        f"{settings.jwt_audience!r}), sent as the bearer token."))}


def agent_card(registry: Registry, base_url: str, settings: Settings) -> AgentCard:
    """The card for the API at `base_url` (as the caller reached it)."""
    kinds = [registry.kind(name) for name in registry.names]
    default = default_kind(registry)
    schemas = {kind.name: kind.input_model.model_json_schema() for kind in kinds}
    schemes = security_schemes(settings)
    return AgentCard(
        name="Waystation",
        description="Long-lived AI-agent runs on Temporal that stop at human decisions. A "
                    "task is a run: send a message whose metadata `kind` names a skill (a run "
                    f"kind{f'; `{default}` when absent' if default else ''}) and whose data "
                    "part is its input. A task waiting at a gate is `input-required`; answer "
                    "it with a data part `{\"decision\", \"feedback\"?, \"answer\"?}` on "
                    "the same task.",
        version=VERSION,
        supported_interfaces=[AgentInterface(
            url=base_url.rstrip("/") + RPC_PATH,
            protocol_binding=TransportProtocol.JSONRPC.value,
            protocol_version=PROTOCOL_VERSION_1_0)],
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=True,
            extensions=[AgentExtension(
                uri=RUN_KINDS_EXTENSION, required=False,
                description="The input JSON Schema of each skill (run kind), by skill id; "
                            f"a message names its kind in metadata `{KIND_KEY}`.",
                params=struct({"inputSchemas": schemas, "defaultKind": default}))]),
        security_schemes=schemes,
        # Any one scheme will do.
        security_requirements=[SecurityRequirement(schemes={name: StringList()})
                               for name in schemes],
        default_input_modes=[JSON, TEXT],
        default_output_modes=[JSON, TEXT],
        skills=[AgentSkill(
            id=kind.name, name=kind.name.replace("_", " "),
            description=f"{kind.description or f'A {kind.name} run.'} Input: a data part "
                        "valid against this JSON Schema (also the extension's "
                        f"inputSchemas[{kind.name!r}]): "
                        + json.dumps(schemas[kind.name], separators=(",", ":")),
            tags=["waystation", "run-kind", kind.name],
            input_modes=[JSON, TEXT] if registry.messages(kind.name) is not None else [JSON],
            output_modes=[JSON, TEXT]) for kind in kinds])
