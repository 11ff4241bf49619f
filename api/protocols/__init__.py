"""Waystation offered through agent protocols (AG-UI, MCP, A2A), each one package on top of
`waystation.api.services`, as the REST routes are: a protocol maps, it never decides."""
