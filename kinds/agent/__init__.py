"""The agent kind (`agent`): a registered PydanticAI agent, LangGraph graph or OpenAI Agents SDK
agent as a durable conversation (issue 12, seed 003).

- `kind.py`: the descriptor and its hooks (`messages`, `agents`, `configure_worker`, routes,
  console module, fork).
- `workflow.py` (`AgentRun`), `workflow_langgraph.py` and `workflow_openai.py` (a graph's and an
  OpenAI agent's turns), `models.py`, `transcript.py`, `contracts.py` (its vocabulary).
- `activities/`: the agents registry (`registry.py`), each framework's activities, the model
  configuration and metering, local tools, related entities.
- `planner/`: the bundled planner agent; `service.py` + `routes.py`: `/runs/{id}/messages`;
  `console.js`: the conversation on a run's page.
- `sdk.py`, `langgraph.py`, `openai_agents.py`: what an agent registered for the kind imports.
"""
