"""The wedding planner of seed 003: the `agent` run kind's bundled example."""
