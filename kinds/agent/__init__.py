"""The agent kind (`agent`): a registered PydanticAI agent, LangGraph graph or OpenAI Agents SDK
agent as a durable conversation (issue 12, seed 003).

- `kind.py`: the descriptor and its hooks (`agents`; `api`: routes, messages; `console`;
  `worker`: activities, configure; `forks`; `cli`: demo).
- `workflow.py` (`AgentRun`) and the parts it composes: `conversation.py` (the people's
  messages, the wait, a returning member), `approvals.py` (a tool call's gate), `turns/` (one
  framework's turns per module, behind one interface), `host.py` (what they ask of the run);
  `workflow_langgraph.py` and `workflow_openai.py` (the LangGraph and OpenAI Agents SDK
  adapters), `models.py`, `transcript.py`, `contracts.py` (its vocabulary).
- `activities/`: the agents registry (`registry.py`), each framework's activities, the model
  configuration and metering, local tools, related entities.
- `planner/`: the bundled planner agent; `service.py` + `routes.py`: `/runs/{id}/messages`;
  `console.js`: the conversation on a run's page.
- `sdk.py`, `langgraph.py`, `openai_agents.py`: what an agent registered for the kind imports.
"""
