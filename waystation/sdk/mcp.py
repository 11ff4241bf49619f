"""A kind's MCP tools (its `mcp_tools` hook): the tool's description, the caller, and the
arguments' base and idempotency key (a tool argument here, not the HTTP header of
`waystation.sdk.routes.IdempotencyKey`).
"""

from __future__ import annotations

from temporalio import workflow

# Passed through Temporal's sandbox, as the package's root is (waystation/sdk/__init__.py).
with workflow.unsafe.imports_passed_through():
    from waystation.api.protocols.mcp.arguments import Arguments, IdempotencyKey
    from waystation.api.protocols.mcp.mapping import Caller, ToolSpec

__all__ = ["Arguments", "Caller", "IdempotencyKey", "ToolSpec"]
