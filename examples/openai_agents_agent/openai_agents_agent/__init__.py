"""A refunds desk: your own OpenAI Agents SDK agent as a Waystation `agent` run (see README.md)."""
