"""A plug-in whose agent has the planner's durable name (its activities would clash)."""

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.models.test import TestModel

AGENTS = {"second_planner": Agent(TestModel(), name="planner",
                                  capabilities=[TemporalDurability()])}
