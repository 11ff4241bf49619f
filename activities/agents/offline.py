"""The offline default backend: deterministic, plausible, schema-valid output with no network.

Output is derived from the request itself (its grounding, feedback, instructions) through a
seeded generator, so the same request always yields the same answer, a replayed test is
stable, and a demo reads like a real run. A task a registered kind answers itself
(`WorkerHooks.offline_answers`, given by the worker: the validation crew's tasks) gets that typed,
internally consistent answer when it asks for that answer's schema; any other task with an
output schema gets a value matching it, and one without gets a short text answer.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import random
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from waystation.activities.agents.base import AgentRequest, AgentResponse, ProgressReporter
from waystation.activities.agents.schema_example import example_for

# A kind's typed answer to one of its tasks: (the task's context, a person's feedback, the
# request's seeded generator) -> the task's output model.
OfflineAnswer = Callable[[dict[str, Any], str | None, random.Random], BaseModel]

_STOPWORDS = {
    "a", "an", "and", "the", "for", "to", "of", "in", "on", "with", "that", "who", "is", "are",
    "it", "by", "from", "at", "as", "be", "or", "we", "our", "their", "they", "this", "app",
    "helps",
}

# Every registered kind's answers by task name, with the output model each returns, given by
# the worker as it is built (`use_offline_answers`); none until then.
_answers: Mapping[str, tuple[type[BaseModel], OfflineAnswer]] = {}


def use_offline_answers(answers: Mapping[str, OfflineAnswer]) -> None:
    global _answers
    _answers = {task: (_output_model(task, answer), answer) for task, answer in answers.items()}


def _output_model(task: str, answer: OfflineAnswer) -> type[BaseModel]:
    """The model `answer` is annotated to return: it answers only a request asking for that
    model's schema, so a batch step that merely shares a crew task's name (and reads another
    context) gets a value of its own schema instead."""
    model = typing.get_type_hints(answer).get("return")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"the offline answer to {task!r} must be annotated with the pydantic "
                        "model it returns")
    return model


@functools.cache
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def keywords(text: str) -> list[str]:
    words = [w for w in re.findall(r"[a-zA-Z]{3,}", text.lower()) if w not in _STOPWORDS]
    return list(dict.fromkeys(words)) or ["product"]


class OfflineBackend:
    name = "offline"

    def __init__(self, delay_ms: int = 0) -> None:
        # An optional pause before answering: realistic demo pacing, and a window in which
        # a test can kill the worker mid-task.
        self.delay_ms = delay_ms

    @property
    def in_place(self) -> bool:
        """Short and local unless told to pause (see `AgentBackend`)."""
        return self.delay_ms == 0

    async def aclose(self) -> None:
        return None

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        if self.delay_ms > 0:
            # Work in three steps and say so, as a real crew reports while it thinks.
            for percent, note in ((33, "researching"), (66, "drafting"), (100, "reviewing")):
                await asyncio.sleep(self.delay_ms / 3000)
                if progress is not None:
                    await progress(percent, note)
        seed_text = json.dumps(request.model_dump(), sort_keys=True, default=str)
        rng = random.Random(hashlib.sha256(seed_text.encode()).digest())
        typed = _answers.get(request.task)
        words = keywords(request.instructions)
        if typed is not None and request.output_schema == _schema_of(typed[0]):
            answer = typed[1](request.context, request.feedback, rng)
            output = answer.model_dump(mode="json")
            text = json.dumps(output)
        elif request.output_schema is not None:
            output = example_for(request.output_schema, words=words)
            text = json.dumps(output)
        else:
            text = f"{request.task} done: {' '.join(words[:5])}"
            output = {"summary": text, "notes": words[:5]}
        # Like a provider's completion id, but the same for the same request.
        session_id = "offline-" + hashlib.sha256(seed_text.encode()).hexdigest()[:16]
        return AgentResponse(output=output, text=text, input_tokens=len(seed_text) // 4,
                             output_tokens=len(text) // 4, cost_usd=0.0, model="offline",
                             session_id=session_id)
