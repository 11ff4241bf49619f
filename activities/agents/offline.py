"""The offline default backend: deterministic, plausible, structured output with no network.

Output is derived from the request itself (idea text, earlier outputs, feedback) through a
seeded generator, so the same request always yields the same answer, a replayed test is
stable, and a demo reads like a real validation run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from collections.abc import Callable
from typing import Any

from activities.agents.base import AgentRequest, AgentResponse, ProgressReporter

_STOPWORDS = {
    "a", "an", "and", "the", "for", "to", "of", "in", "on", "with", "that", "who", "is", "are",
    "it", "by", "from", "at", "as", "be", "or", "we", "our", "their", "they", "this", "app",
}
_SEGMENTS = ["busy professionals", "small clinics", "independent retailers", "students",
             "remote teams", "parents of toddlers", "freelance designers", "local restaurants"]
_SIGNALS = ["strong", "strong", "moderate", "weak"]


def _keywords(text: str) -> list[str]:
    words = [w for w in re.findall(r"[a-zA-Z]{3,}", text.lower()) if w not in _STOPWORDS]
    return list(dict.fromkeys(words)) or ["product"]


def _idea(request: AgentRequest) -> str:
    return str(request.context.get("entrepreneur_input") or request.instructions)


def _segment(request: AgentRequest, rng: random.Random) -> str:
    return str(request.context.get("target_segment") or rng.choice(_SEGMENTS))


def _founders_brief(request: AgentRequest, rng: random.Random) -> dict[str, Any]:
    idea, words = _idea(request), _keywords(_idea(request))
    brief = {
        "idea": idea,
        "problem_statement": f"People struggle with {' '.join(words[:3])} today.",
        "proposed_solution": f"A service that makes {words[0]} effortless.",
        "target_customers": rng.sample(_SEGMENTS, 3),
        "key_assumptions": [f"Customers pay to solve {w}" for w in words[:3]],
        "success_criteria": {"signups": rng.randrange(100, 1000, 50),
                             "conversion_pct": rng.randint(2, 9)},
    }
    if request.feedback:
        brief["revision_note"] = f"Revised per founder feedback: {request.feedback}"
    return brief


def _interview(request: AgentRequest, rng: random.Random) -> dict[str, Any]:
    words = _keywords(_idea(request))
    return {"questions_asked": rng.randint(6, 12),
            "themes": [f"{w} pain" for w in words[:4]],
            "founder_confidence": rng.choice(["high", "medium"])}


def _customer_profile(request: AgentRequest, rng: random.Random) -> dict[str, Any]:
    words = _keywords(_idea(request))
    return {"segment": _segment(request, rng),
            "jobs": [f"get {w} done" for w in words[:3]],
            "pains": [f"{w} takes too long" for w in words[:2]] + ["costs too much"],
            "gains": ["saves an hour a week", f"trustworthy {words[0]}"]}


def _value_map(request: AgentRequest, rng: random.Random) -> dict[str, Any]:
    words = _keywords(_idea(request))
    return {"products": [f"{words[0]} assistant", "mobile companion"],
            "pain_relievers": [f"automates {w}" for w in words[:2]],
            "gain_creators": ["weekly insights", "one-tap sharing"]}


def _fit(request: AgentRequest, rng: random.Random) -> dict[str, Any]:
    segment = _segment(request, rng)
    return {"fit_score": rng.randint(55, 92), "segment": segment,
            "gaps": ["pricing untested", "onboarding friction"][: rng.randint(1, 2)],
            "alternative_segments": [s for s in rng.sample(_SEGMENTS, 3) if s != segment][:2]}


def _evidence(kind: str) -> Callable[[AgentRequest, random.Random], dict[str, Any]]:
    def make(request: AgentRequest, rng: random.Random) -> dict[str, Any]:
        return {"kind": kind, "experiments": [
            {"name": f"{kind} test {i + 1}", "metric": "conversion_pct",
             "result": round(rng.uniform(1, 12), 1)} for i in range(rng.randint(2, 4))]}
    return make


def _signal(request: AgentRequest, rng: random.Random) -> dict[str, Any]:
    signal = rng.choice(_SIGNALS)
    return {"signal": signal, "confidence": round(rng.uniform(0.55, 0.95), 2),
            "rationale": f"Evidence from {request.crew} experiments reads {signal}."}


def _unit_economics(request: AgentRequest, rng: random.Random) -> dict[str, Any]:
    cac = rng.randint(20, 120)
    ltv = cac * rng.uniform(1.2, 5.0)
    return {"cac_usd": cac, "ltv_usd": round(ltv), "ltv_cac_ratio": round(ltv / cac, 2),
            "payback_months": rng.randint(3, 18)}


def _pivot(request: AgentRequest, rng: random.Random) -> dict[str, Any]:
    signals = [str(request.context.get(k, "")) for k in
               ("desirability_signal", "feasibility_signal", "viability_signal")]
    weak = sum(s == "weak" for s in signals)
    decision = "proceed" if weak == 0 else "pivot" if weak == 1 else "kill"
    return {"decision": decision,
            "pivot_type": None if decision == "proceed" else rng.choice(
                ["customer_segment", "value_proposition", "channel", "revenue_model"]),
            "rationale": f"{3 - weak} of 3 validation signals hold."}


_TASKS: dict[str, Callable[[AgentRequest, random.Random], dict[str, Any]]] = {
    "interview_founder": _interview,
    "draft_founders_brief": _founders_brief,
    "profile_customer_segment": _customer_profile,
    "design_value_map": _value_map,
    "assess_fit": _fit,
    "run_desirability_experiments": _evidence("desirability"),
    "assess_technical_feasibility": _evidence("feasibility"),
    "model_unit_economics": _unit_economics,
    "judge_desirability": _signal,
    "judge_feasibility": _signal,
    "judge_viability": _signal,
    "recommend_pivot": _pivot,
}


class OfflineBackend:
    name = "offline"

    def __init__(self, delay_ms: int = 0) -> None:
        # An optional pause before answering: realistic demo pacing, and a window in which
        # a test can kill the worker mid-task.
        self.delay_ms = delay_ms

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
        make = _TASKS.get(request.task)
        output = make(request, rng) if make else {"summary": f"{request.task} done",
                                                  "notes": _keywords(request.instructions)[:5]}
        prompt_tokens = len(seed_text) // 4
        completion_tokens = len(json.dumps(output)) // 4
        return AgentResponse(output=output, input_tokens=prompt_tokens,
                             output_tokens=completion_tokens, cost_usd=0.0, model="offline")
