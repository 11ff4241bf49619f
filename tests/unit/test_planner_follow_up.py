"""The offline planner's follow-up turn (issue 43): a question about the plan is answered from
the re-priming summary alone (a run continued as new, or a member returning), and a request
is still carried out."""

from __future__ import annotations

from pydantic_ai.messages import ModelRequest, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo

from tests.agent_helpers import FOLLOW_UP
from waystation.kinds.agent.planner.model import plan

SUMMARY = ("Summary so far: need: category venue, city Bangalore; shortlist: Old Mill Barn "
           "(v-venue-02), Rosewood Estate (v-venue-03); booked: Rosewood Estate on 2027-02-14 "
           "(bk-1a2b)")


def _info(instructions: str) -> AgentInfo:
    return AgentInfo(function_tools=[], allow_text_output=True, output_tools=[],
                     model_settings=None, model_request_parameters=ModelRequestParameters(),
                     instructions=instructions)


async def _answer(text: str, instructions: str = "") -> list:
    response = await plan([ModelRequest(parts=[UserPromptPart(text)])], _info(instructions))
    return response.parts


async def test_the_follow_up_is_answered_from_the_summary_it_was_re_primed_from():
    parts = await _answer(FOLLOW_UP, f"Plan a wedding.\n{SUMMARY}")
    assert parts == [TextPart(
        "I shortlisted Old Mill Barn (v-venue-02), Rosewood Estate (v-venue-03). The booking "
        "is confirmed: Rosewood Estate on 2027-02-14 (bk-1a2b).")]


async def test_with_nothing_decided_it_says_so_and_calls_no_tool():
    assert await _answer("Is anything booked?") == [TextPart(
        "Nothing is shortlisted yet. Nothing is booked yet: tell me which vendor to book, "
        "and for when.")]


async def test_a_request_to_book_is_still_a_booking():
    for text in ("Book Rosewood Estate on 2027-02-14 for 200 guests",
                 "Can you book Rosewood Estate on 2027-02-14 for 200 guests?",
                 "Which is Rosewood Estate? Book Rosewood Estate on 2027-02-14 for 200 guests."):
        (part,) = await _answer(text, SUMMARY)
        assert isinstance(part, ToolCallPart) and part.tool_name == "book_vendor", text
