"""A refunds desk: your own PydanticAI agent as a Waystation `agent` run (see README.md)."""
