"""Waystation offered through agent protocols (A2A; MCP beside it), each one package on top of
`api.services`, as the REST routes are: a protocol maps, it never decides."""
