"""An OpenAI Agents SDK agent whose tool is a bare function (no @function_tool, no
activity_as_tool): refused at registration, saying what to make of it."""

from agents import Agent


def lookup(order_id: str) -> str:
    return order_id


AGENTS = {"bare_tool": Agent(name="bare_tool", tools=[lookup])}  # type: ignore[list-item]
