"""The validation kind (`validation`): a startup idea through a crew's phases, with a founder's
approval at each gate (seed 000).

- `kind.py`: the `RunKind` descriptor; `workflow.py`, `models.py`, `phases.py`, `gates.py`:
  the `ValidationRun` workflow, its models, phases and gates;
- `activities/`: the crew task activity (`crew_tasks.py`), its typed outputs and prompts;
- `prompts/validation/<task>.md`: the task prompts (`WAYSTATION_PROMPTS_DIR/validation/`
  overrides them);
- `offline_answers.py`: the offline backend's typed answers to the crew's tasks (the kind's
  `WorkerHooks.offline_answers`).

Import no submodule here: the worker imports the workflow module in Temporal's sandbox.
"""
