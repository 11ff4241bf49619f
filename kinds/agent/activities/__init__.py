"""The agent kind's side effects and worker-side parts: the agents registry (`registry.py`),
each framework's activities (`langgraph.py`, `openai.py`; a PydanticAI agent's come from its
`TemporalDurability`), the configured model and its metering (`model.py`, `metering.py`),
local tools (`local_tools.py`) and related entities (`entities.py`)."""
