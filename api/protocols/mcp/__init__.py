"""Waystation as an MCP server at `/mcp`: `server` builds and mounts it, `mapping` maps its
tools and resources onto `waystation.api.services` (their arguments' models in `arguments`), `tasks`
follows a run as an MCP task."""
