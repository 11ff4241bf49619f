"""The validation kind (`validation`): a startup idea through a crew's phases, with a founder's
approval at each gate (seed 000).

- `kind.py`: the `RunKind` descriptor; `workflow.py`, `models.py`, `phases.py`, `gates.py`:
  the `ValidationRun` workflow, its models, phases and gates;
- `activities/`: the crew task activity (`crew_tasks.py`), its typed outputs and prompts;
- `prompts/validation/<task>.md`: the task prompts (`WAYSTATION_PROMPTS_DIR/validation/`
  overrides them).

The offline backend's canned answers stay in the core (`activities/validation/
offline_answers.py`, read by `activities/agents/offline.py`).

Import no submodule here: the worker imports the workflow module in Temporal's sandbox.
"""
