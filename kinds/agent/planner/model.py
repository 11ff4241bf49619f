"""The planner's offline model: a PydanticAI `FunctionModel` that plans tool calls from the
message, deterministically, with no network.

It reads the latest request: after a person's message it picks the tool the message asks for
(search, shortlist, availability, booking) with arguments taken from the message (category,
city, guests, budget, style, date), the earlier turns, or the re-priming summary in its
instructions. A request that asks for several steps at once ("find a venue, shortlist three
and book the best") is carried on after each tool's result until the booking, which waits
for approval; otherwise, after tool results it answers in words. It never acts on an empty
list: lacking what it needs, it says what that is. A question about the plan ("Which three
did you shortlist, and is the booking confirmed?") is answered from what the conversation and
the re-priming summary say, and never shortlists or books: only a request does. Asked to
summarize, it writes the `context_summary`. Told a member returns (seed 003), its answer
greets them by name with the summary it was re-primed from ("Welcome back, Rohan! ...").
A real model replaces it unchanged: the agent, its tools and the approval gate stay the same.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from waystation.kinds.agent.contracts import RETURNING_MEMBER, SUMMARY_REQUEST
from waystation.kinds.agent.planner.catalogue import vendors

# Asking to compare makes the model call a tool that does not exist: PydanticAI tells it so,
# and it carries on (the "a model that calls an unknown tool").
UNKNOWN_TOOL = "compare_vendors"
CATEGORIES = {"venue": "venue", "hall": "venue", "caterer": "caterer", "catering": "caterer",
              "food": "caterer", "photographer": "photographer", "photos": "photographer",
              "florist": "florist", "flowers": "florist"}
DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
VENDOR_ID = re.compile(r"\bv-[a-z]+-\d{2}\b")
# "under 15 lakh", "budget 4,00,000", "below 1.2 crore", "max 90k" (INR).
BUDGET = re.compile(r"(?:under|below|within|budget(?: of)?|up to|upto|max(?:imum)?|less than)"
                    r"\s*(?:rs\.?|inr|₹)?\s*(\d[\d,]*(?:\.\d+)?)\s*"
                    r"(lakhs?|lacs?|crores?|cr|k|thousand)?\b")
UNITS = {"lakh": 100_000, "lakhs": 100_000, "lac": 100_000, "lacs": 100_000,
         "crore": 10_000_000, "crores": 10_000_000, "cr": 10_000_000, "k": 1_000,
         "thousand": 1_000}
# A booking's date when the message names none: the approval shows it, and an edit changes it.
DEFAULT_DATE = "2027-02-14"
# A tool call's arguments stream in pieces of this many characters.
ARGS_CHUNK = 16
NEED_SEARCH = ("I can search vendors (venues, caterers, photographers, florists), shortlist "
               "them, check their availability and book one. Tell me what you need: the kind "
               "of vendor, and if you like the city, the number of guests, the budget and the "
               "style.")
RETURNING = re.compile(re.escape(RETURNING_MEMBER) + r"\s*([^,\n]+),")
# A question that asks what was shortlisted or booked, as against one that asks to look
# something up ("Which are free on 2027-03-01?"), which the tools answer. "Can", "could" and
# "would" open requests, not questions.
ABOUT_THE_PLAN = ("shortlist", "book", "confirm", "decided", "so far")
QUESTION_WORDS = ("which", "what", "is", "are", "did", "have", "has", "was", "were", "do",
                  "does", "who", "when", "where", "how")
NEED_VENDORS = ("There is nothing to shortlist yet: tell me what to look for (a venue, "
                "caterer, photographer or florist, and the city, guests, budget or style), or "
                "name the vendors.")


async def plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    delay_ms = int(os.environ.get("WAYSTATION_OFFLINE_DELAY_MS", "0") or 0)
    if delay_ms:
        # A window in which a test can kill the worker mid-request, as for the offline backend.
        await asyncio.sleep(delay_ms / 1000)
    latest = messages[-1]
    assert isinstance(latest, ModelRequest)
    returns = [p for p in latest.parts if isinstance(p, ToolReturnPart)]
    instructions = info.instructions or ""
    if returns:
        parts: list[TextPart | ToolCallPart] = _greeted(_carry_on(returns, messages),
                                                        instructions)
    else:
        prompt = " ".join(str(p.content) for p in latest.parts if isinstance(p, UserPromptPart))
        if prompt.startswith(SUMMARY_REQUEST):
            parts = [TextPart(_summary(messages, instructions))]
        else:
            parts = _greeted(_respond(prompt, messages, instructions), instructions)
    return ModelResponse(parts=parts, usage=_usage(messages, parts), model_name="planner-offline")


def _greeted(parts: list[TextPart | ToolCallPart], instructions: str
             ) -> list[TextPart | ToolCallPart]:
    """The turn's answer, opened with a greeting of the returning member the instructions name
    and where things stand (the summary); a tool call is not an answer yet."""
    returning = RETURNING.search(instructions)
    said = [p for p in parts if isinstance(p, TextPart)]
    if returning is None or not said or len(said) < len(parts):
        return parts
    name = returning.group(1).strip()
    where = instructions.partition("Summary so far: ")[2].strip()
    greeting = f"Welcome back, {name[:1].upper()}{name[1:]}! Where things stand: {where}."
    return [TextPart(f"{greeting} {said[0].content}"), *said[1:]]


def _usage(messages: list[ModelMessage], parts: list[TextPart | ToolCallPart]) -> RequestUsage:
    """About four characters a token, as the offline crew backend counts."""
    seen = sum(len(str(getattr(p, "content", ""))) for m in messages for p in m.parts)
    said = sum(len(p.content) if isinstance(p, TextPart) else len(p.args_as_json_str())
               for p in parts)
    return RequestUsage(input_tokens=seen // 4 + 1, output_tokens=said // 4 + 1)


def _respond(prompt: str, messages: list[ModelMessage], instructions: str
             ) -> list[TextPart | ToolCallPart]:
    text = prompt.lower()
    named = [v.id for v in vendors().values() if v.name.lower() in text]
    date = DATE.search(prompt)
    search = _search_args(text)
    # A message that states what to look for searches anew; one that only names a category
    # ("I like the first three venues") acts on what was found before.
    fresh = search if search is not None and len(search) > 1 else None
    if _asks_about_the_plan(text):
        return [TextPart(_recap(_facts(messages, instructions)))]
    if "compare" in text:
        return [ToolCallPart(UNKNOWN_TOOL, {"vendor_ids": named or _shortlisted(messages,
                                                                              instructions)})]
    if "book" in text and named:
        return [ToolCallPart("book_vendor", {
            "vendor_id": named[0], "date": date.group(1) if date else DEFAULT_DATE,
            "guests": _guests(text) or _guests(_all_prompts(messages)) or 100})]
    if ("availab" in text or "free on" in text) and fresh is None:
        ids = named or _shortlisted(messages, instructions)
        if ids:
            return [ToolCallPart("check_availability", {
                "vendor_ids": ids, "date": date.group(1) if date else DEFAULT_DATE})]
        return [TextPart(NEED_VENDORS)]
    if ("like" in text or "shortlist" in text) and fresh is None:
        ids = named or _first_found(messages, _count(text))
        if ids:
            return [ToolCallPart("shortlist", {"vendor_ids": ids})]
        if search is None:
            return [TextPart(NEED_VENDORS)]
    if search is not None:
        return [ToolCallPart("search_vendors", search)]
    return [TextPart(NEED_SEARCH)]


def _search_args(text: str) -> dict[str, Any] | None:
    """The search a message states: its category, with the city, style, guests and budget
    it names; None when it names no category."""
    category = next((c for word, c in CATEGORIES.items() if word in text), None)
    if category is None:
        return None
    args: dict[str, Any] = {"category": category}
    city = next((v.city for v in vendors().values() if v.city.lower() in text), None)
    style = next((v.style for v in vendors().values() if v.style in text), None)
    for key, value in (("city", city), ("style", style), ("min_capacity", _guests(text)),
                       ("max_price", _budget(text))):
        if value is not None:
            args[key] = value
    return args


def _carry_on(returns: list[ToolReturnPart], messages: list[ModelMessage]
              ) -> list[TextPart | ToolCallPart]:
    """After tool results: the next step the turn's request asks for (search, then
    shortlist, then availability, then booking the best that is free), or the answer."""
    request = _turn_prompt(messages).lower()
    wants_book = "book" in request
    wants_shortlist = wants_book or "shortlist" in request
    date = DATE.search(request)
    latest = returns[-1]
    content: Any = latest.content  # each tool's own value (see catalogue.py)
    if latest.outcome != "retried":
        if latest.tool_name == "search_vendors" and wants_shortlist and content:
            ids = [v["id"] for v in content][:_count(request)]
            return [ToolCallPart("shortlist", {"vendor_ids": ids})]
        if latest.tool_name == "shortlist" and wants_book and content["shortlisted"]:
            return [ToolCallPart("check_availability", {
                "vendor_ids": [v["id"] for v in content["shortlisted"]],
                "date": date.group(1) if date else DEFAULT_DATE})]
        if latest.tool_name == "check_availability" and wants_book:
            free = [a["id"] for a in content["availability"] if a["available"]]
            if free:  # the shortlist is cheapest first: the best that is free
                return [ToolCallPart("book_vendor", {
                    "vendor_id": free[0], "date": content["date"],
                    "guests": _guests(request) or 100})]
    return [TextPart(_after_tools(_turn_returns(messages)))]


def _turn_prompt(messages: list[ModelMessage]) -> str:
    """The person's latest message: the request this turn carries out."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            said = [str(p.content) for p in message.parts if isinstance(p, UserPromptPart)]
            if said:
                return " ".join(said)
    return ""


def _turn_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """Every tool result since the person's latest message, oldest first."""
    found: list[ToolReturnPart] = []
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            if any(isinstance(p, UserPromptPart) for p in message.parts):
                break
            found[:0] = [p for p in message.parts if isinstance(p, ToolReturnPart)]
    return found


def _after_tools(returns: list[ToolReturnPart]) -> str:
    lines = []
    for part in returns:
        if part.outcome == "retried":
            # PydanticAI's answer to an unknown tool (or bad arguments): carry on without it.
            lines.append(f"I could not use {part.tool_name}: I can search, "
                         "shortlist, check availability and book instead.")
            continue
        content = part.content
        if part.tool_name == "search_vendors" and isinstance(content, list):
            found = "; ".join(f"{v['name']} ({v['id']}, {v['capacity'] or '-'} guests, "
                              f"{v['price']} INR, {v['style']})" for v in content)
            lines.append(f"I found {len(content)}: {found}." if content
                         else "Nothing in the catalogue matches; try fewer conditions.")
        elif part.tool_name == "shortlist" and isinstance(content, dict):
            names = ", ".join(v["name"] for v in content["shortlisted"])
            lines.append(f"Shortlisted {names}. Take your time; anyone in the group can "
                         "carry on from here.")
        elif part.tool_name == "check_availability" and isinstance(content, dict):
            free = [a["name"] for a in content["availability"] if a["available"]]
            busy = [a["name"] for a in content["availability"] if not a["available"]]
            lines.append(f"On {content['date']}: free: {', '.join(free) or 'none'}; "
                         f"taken: {', '.join(busy) or 'none'}.")
        elif part.tool_name == "book_vendor" and isinstance(content, dict):
            lines.append(f"Booked {content['vendor']} for {content['guests']} guests on "
                         f"{content['date']} (booking {content['booking_id']})."
                         if content.get("booked") else f"Not booked: {content.get('reason')}.")
        else:  # a denial: the reviewer's words come back as the tool's result
            lines.append(f"I did not {part.tool_name.replace('_', ' ')}: {content}")
    return " ".join(lines)


def _summary(messages: list[ModelMessage], instructions: str) -> str:
    """What a member coming back needs: the need, the shortlist, what is booked."""
    said = [f"{k}: {v}" for k, v in _facts(messages, instructions).items() if v]
    earlier = instructions.partition("Summary so far: ")[2].strip()
    return "; ".join(said) if said else (earlier or "nothing decided yet")


def _facts(messages: list[ModelMessage], instructions: str) -> dict[str, str | None]:
    """The need, the shortlist and the booking: the summary the run was re-primed from
    (written by `_summary`), brought up to date by the tool calls and results since."""
    earlier = instructions.partition("Summary so far: ")[2].strip()
    facts: dict[str, str | None] = {"need": None, "shortlist": None, "booked": None}
    for said in earlier.split("; "):
        key, _, value = said.partition(": ")
        if key in facts and value:
            facts[key] = value
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart) and part.tool_name == "search_vendors":
                facts["need"] = ", ".join(f"{k} {v}" for k, v in part.args_as_dict().items())
            if isinstance(listed := _returned(part, "shortlist"), dict):
                facts["shortlist"] = ", ".join(f"{v['name']} ({v['id']})"
                                               for v in listed["shortlisted"])
            if isinstance(booked := _returned(part, "book_vendor"), dict) \
                    and booked.get("booked"):
                facts["booked"] = (f"{booked['vendor']} on {booked['date']} "
                                   f"({booked['booking_id']})")
    return facts


def _asks_about_the_plan(text: str) -> bool:
    """A question (every sentence of it) about what was shortlisted or booked: a booking
    asked about is not a booking asked for."""
    sentences = [s.split() for s in re.split(r"(?<=[?.!])\s+", text.strip()) if s.strip()]
    # By its first word: "Can you book Rosewood Estate?" is a request, though it ends so.
    questions = all(words[0].strip(",") in QUESTION_WORDS for words in sentences)
    return bool(sentences) and questions and any(word in text for word in ABOUT_THE_PLAN)


def _recap(facts: dict[str, str | None]) -> str:
    shortlist = (f"I shortlisted {facts['shortlist']}." if facts["shortlist"]
                 else "Nothing is shortlisted yet.")
    booked = (f"The booking is confirmed: {facts['booked']}." if facts["booked"]
              else "Nothing is booked yet: tell me which vendor to book, and for when.")
    return f"{shortlist} {booked}"


def _returned(part: Any, tool: str) -> Any:
    """What `tool` returned, if `part` is its result (the content is the tool's own value)."""
    return part.content if isinstance(part, ToolReturnPart) and part.tool_name == tool else None


def _shortlisted(messages: list[ModelMessage], instructions: str) -> list[str]:
    for message in reversed(messages):
        for part in message.parts:
            if isinstance(listed := _returned(part, "shortlist"), dict):
                return [v["id"] for v in listed["shortlisted"]]
    # Re-primed after continue-as-new: the shortlist lives on in the summary.
    return list(dict.fromkeys(VENDOR_ID.findall(instructions)))


def _first_found(messages: list[ModelMessage], count: int) -> list[str]:
    for message in reversed(messages):
        for part in message.parts:
            if isinstance(found := _returned(part, "search_vendors"), list):
                return [v["id"] for v in found][:count]
    return []


def _all_prompts(messages: list[ModelMessage]) -> str:
    return " ".join(str(p.content).lower() for m in messages for p in m.parts
                    if isinstance(p, UserPromptPart))


def _guests(text: str) -> int | None:
    found = re.search(r"(\d+)\s*(?:guests|people|persons)", text)
    return int(found.group(1)) if found else None


def _count(text: str) -> int:
    words = {"two": 2, "three": 3, "four": 4, "five": 5, "2": 2, "3": 3, "4": 4, "5": 5}
    found = re.search(r"(?:first|top|shortlist)\s+(\w+)", text)
    return words.get(found.group(1), 3) if found else 3


def _budget(text: str) -> int | None:
    found = BUDGET.search(text)
    if found is None:
        return None
    amount = float(found.group(1).replace(",", ""))
    return int(amount * UNITS.get(found.group(2) or "", 1))


async def stream_plan(messages: list[ModelMessage], info: AgentInfo
                      ) -> AsyncIterator[str | DeltaToolCalls]:
    """`plan`'s response streamed as a model writes it: words of text (or a tool call's
    arguments in pieces) every WAYSTATION_OFFLINE_TOKEN_MS (default 8 ms), so the demo and the
    tests see tokens arrive (issue 43); the same parts, ids and text as `plan` answers whole."""
    every = int(os.environ.get("WAYSTATION_OFFLINE_TOKEN_MS", "8") or 0) / 1000
    response = await plan(messages, info)
    for index, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            for token in re.findall(r"\S*\s*", part.content):
                if token:
                    await asyncio.sleep(every)
                    yield token
        elif isinstance(part, ToolCallPart):
            args = part.args_as_json_str()
            for start in range(0, len(args), ARGS_CHUNK):
                await asyncio.sleep(every)
                yield {index: DeltaToolCall(name=part.tool_name if start == 0 else None,
                                            json_args=args[start:start + ARGS_CHUNK],
                                            tool_call_id=part.tool_call_id)}


class PlannerModel(FunctionModel):
    """`plan` and `stream_plan` as a model. A streamed response's request is counted as `plan`
    counts it (about four characters a token of the messages), not as FunctionModel's estimate
    of a request of nothing; its output as FunctionModel counts what is streamed."""

    @asynccontextmanager
    async def request_stream(self, messages: list[ModelMessage],
                             model_settings: ModelSettings | None,
                             model_request_parameters: ModelRequestParameters,
                             run_context: RunContext[Any] | None = None
                             ) -> AsyncIterator[StreamedResponse]:
        async with super().request_stream(messages, model_settings, model_request_parameters,
                                          run_context) as stream:
            # `_usage` is what a StreamedResponse's implementations keep up to date.
            stream._usage = RequestUsage(input_tokens=_usage(messages, []).input_tokens)
            yield stream


def planner_model() -> FunctionModel:
    return PlannerModel(plan, stream_function=stream_plan, model_name="planner-offline")

