"""The batch kind: many items through a pipeline of prompt-template steps (seeds 002, 004).

- `kind.py`: the `RunKind` descriptor (registered as the entry point `batch`), with its hooks;
- `workflow.py` (`BatchJob`) and the parts it composes: `slices.py` (the items through the
  pipeline), `budget.py` (spend and its gate), `trial.py` (the test item and its gate),
  `host.py` (what they ask of the job); `models.py`, `rerun.py`: its models, re-runs;
- `activities/`: item loading, templates, output checks and the activities that run items;
- `repository.py` and `queries/`: the `jobs`, `work_units` and `item_outputs` tables, which
  `migrations/084_batch_tables.sql` creates (docs/run-kinds.md: the kinds' tables before they
  owned them);
- `routes/`, `service.py`, `schemas.py`, `items_policy.py`: `/jobs` and `/items`;
- `routes/workers.py`, `workers_*.py`, `queries/workers.sql`: `/workers`, the worker
  processes and the items they run;
- `mcp.py`: its MCP tools;
- `console.js`: the run page's batch sections.

Import no submodule here: the worker imports the workflow module in Temporal's sandbox.
"""
