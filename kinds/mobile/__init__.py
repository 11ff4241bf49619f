"""The mobile exploration kind (`mobile_agent`): an agent explores an Android app and records
its screen graph (seed 001).

- `kind.py`: the `RunKind` descriptor with its hooks (its start check: `device_policy.py`);
- `workflow.py`, `models.py`, `policy.py`: the `MobileAgentRun` workflow, its models and the
  exploration policy;
- `activities/`: device drivers (adb, the bundled simulator), the UI-hierarchy parser, screen
  identity and the step activity that writes the screen graph;
- `repository.py` and `queries/`: the graph tables (`apps`, `screens`, `actions`, `edges`,
  `graph_persistence_outcomes`) and `mobile_runs` (a run's app), which `migrations/` creates
  (085, 086: docs/run-kinds.md, the kinds' tables before they owned them);
- `routes.py`, `service.py`, `graph_render.py`: `/apps/...`, `/runs/{id}/graph`, artifacts;
- `console.js`: the run page's mobile section.

Import no submodule here: the worker imports the workflow module in Temporal's sandbox.
"""
