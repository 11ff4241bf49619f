"""A refunds desk: your own LangGraph graph as a Waystation `agent` run (see README.md)."""
