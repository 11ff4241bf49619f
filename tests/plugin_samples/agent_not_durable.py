"""A plug-in whose PydanticAI agent lacks the TemporalDurability capability."""

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

AGENTS = {"forgetful": Agent(TestModel(), name="forgetful")}
