"""The offline backend's answers to the validation crew (the kind's `WorkerHooks.offline_answers`):
typed, consistent, deterministic.

Each answer is built from the task's grounding (the state it reads), so the chain holds
together the way a good crew's would: the value map relieves the profile's pains, fit scores
how many it covers, the judges grade the evidence's numbers against its thresholds, and the
pivot recommendation follows the signals. The same request always yields the same answer.
"""

from __future__ import annotations

import random
from typing import Any

from waystation.kinds.validation.activities.outputs import (
    CustomerJob,
    CustomerProfile,
    DesirabilityEvidence,
    Experiment,
    FeasibilityEvidence,
    FitAssessment,
    FounderInterview,
    FoundersBrief,
    Gain,
    GainCreator,
    Pain,
    PainReliever,
    PivotAlternative,
    PivotRecommendation,
    SuccessCriterion,
    ValidationSignal,
    ValueMap,
    ViabilityEvidence,
)
from waystation.sdk import OfflineAnswer
from waystation.sdk.agents import keywords

_SEGMENTS = ["busy professionals", "small clinics", "independent retailers", "students",
             "remote teams", "parents of toddlers", "freelance designers", "local restaurants"]

Context = dict[str, Any]


def _idea(c: Context) -> str:
    brief = c.get("founders_brief") or {}
    return str(c.get("entrepreneur_input") or brief.get("idea") or "a product")


def _interview(c: Context, feedback: str | None, rng: random.Random) -> FounderInterview:
    words = keywords(_idea(c))
    return FounderInterview(questions_asked=rng.randint(6, 12),
                            themes=[f"{w} pain" for w in words[:4]],
                            founder_confidence=rng.choice(["high", "medium"]),
                            open_questions=[f"Who pays for {words[0]} today?"])


def _brief(c: Context, feedback: str | None, rng: random.Random) -> FoundersBrief:
    idea, words = _idea(c), keywords(_idea(c))
    themes = (c.get("founder_interview") or {}).get("themes") or [f"{w} pain" for w in words]
    return FoundersBrief(
        idea=idea, problem_statement=f"People struggle with {', '.join(themes[:2])} today.",
        proposed_solution=f"A service that makes {words[0]} effortless.",
        target_customers=rng.sample(_SEGMENTS, 3),
        key_assumptions=[f"Customers pay to solve {w}" for w in words[:3]],
        success_criteria=[SuccessCriterion(metric="signups", target=rng.randrange(100, 1000, 50)),
                          SuccessCriterion(metric="conversion_pct", target=rng.randint(2, 9))],
        revision_note=f"Revised per founder feedback: {feedback}" if feedback else None)


def _profile(c: Context, feedback: str | None, rng: random.Random) -> CustomerProfile:
    words = keywords(_idea(c))
    customers = (c.get("founders_brief") or {}).get("target_customers") or _SEGMENTS[:3]
    segment = str(c.get("target_segment") or customers[0])
    return CustomerProfile(
        segment=segment, adjacent_segments=[s for s in customers if s != segment][:2],
        jobs=[CustomerJob(description=f"get {w} done", importance=rng.randint(3, 5))
              for w in words[:3]],
        pains=[Pain(description=f"{w} takes too long", severity=rng.randint(2, 5))
               for w in words[:2]] + [Pain(description="costs too much", severity=3)],
        gains=[Gain(description="saves an hour a week", relevance=4),
               Gain(description=f"trustworthy {words[0]}", relevance=rng.randint(2, 5))])


def _value_map(c: Context, feedback: str | None, rng: random.Random) -> ValueMap:
    profile = CustomerProfile.model_validate(c["customer_profile"])
    words = keywords(_idea(c))
    # Relieve the most severe pains and create the most relevant gain; the rest are gaps.
    pains = sorted(profile.pains, key=lambda p: -p.severity)[:rng.randint(1, len(profile.pains))]
    gains = sorted(profile.gains, key=lambda g: -g.relevance)[:1]
    return ValueMap(
        products=[f"{words[0]} assistant", "mobile companion"],
        pain_relievers=[PainReliever(relieves=p.description, how=f"automates {p.description}")
                        for p in pains],
        gain_creators=[GainCreator(creates=g.description, how=f"delivers {g.description}")
                       for g in gains])


def _fit(c: Context, feedback: str | None, rng: random.Random) -> FitAssessment:
    profile = CustomerProfile.model_validate(c["customer_profile"])
    value_map = ValueMap.model_validate(c["value_map"])
    relieved = {r.relieves for r in value_map.pain_relievers}
    created = {g.creates for g in value_map.gain_creators}
    gaps = ([p.description for p in profile.pains if p.description not in relieved]
            + [g.description for g in profile.gains if g.description not in created])
    covered = len(profile.pains) + len(profile.gains) - len(gaps)
    score = round(100 * covered / (len(profile.pains) + len(profile.gains)))
    alternatives = profile.adjacent_segments or [s for s in _SEGMENTS if s != profile.segment][:2]
    return FitAssessment(fit_score=score, segment=profile.segment, gaps=gaps,
                         alternative_segments=alternatives)


def _experiments(kind: str, rng: random.Random, sources: list[str]) -> list[Experiment]:
    found = []
    for i in range(rng.randint(2, 4)):
        threshold = float(rng.choice([3, 5, 8]))
        found.append(Experiment(
            name=f"{kind} test {i + 1}", hypothesis=f"at least {threshold:g} % convert",
            metric="conversion_pct", result=round(rng.uniform(1, 12), 1), threshold=threshold,
            sample_size=rng.randrange(50, 500, 10), source=sources[i % len(sources)]))
    return found


def _desirability(c: Context, feedback: str | None, rng: random.Random) -> DesirabilityEvidence:
    segment = (c.get("customer_profile") or {}).get("segment", "the segment")
    experiments = _experiments("desirability", rng, [f"landing page for {segment}",
                                                     "pre-order form", "interview panel"])
    return DesirabilityEvidence(experiments=experiments, summary=_passes(experiments))


def _feasibility(c: Context, feedback: str | None, rng: random.Random) -> FeasibilityEvidence:
    experiments = _experiments("feasibility", rng, ["prototype spike", "vendor quote",
                                                    "load test"])
    return FeasibilityEvidence(experiments=experiments, summary=_passes(experiments),
                               technical_risks=["integration with existing tools"])


def _passes(experiments: list[Experiment]) -> str:
    passed = sum(bool(e.passed) for e in experiments)
    return f"{passed} of {len(experiments)} experiments met their threshold."


def _economics(c: Context, feedback: str | None, rng: random.Random) -> ViabilityEvidence:
    cac = rng.randint(20, 120)
    ltv = round(cac * rng.uniform(1.2, 5.0))
    return ViabilityEvidence(cac_usd=cac, ltv_usd=ltv, ltv_cac_ratio=round(ltv / cac, 2),
                             payback_months=rng.randint(3, 18),
                             assumptions=["churn of 4 % a month", "price of $29 a month"],
                             sources=["pricing page test", "competitor benchmarks"])


def _judge_experiments(field: str) -> OfflineAnswer:
    def judge(c: Context, feedback: str | None, rng: random.Random) -> ValidationSignal:
        experiments = [Experiment.model_validate(e) for e in c[field]["experiments"]]
        passed = [e for e in experiments if e.passed]
        share = len(passed) / len(experiments)
        strength = "strong" if share == 1 else "moderate" if share >= 0.5 else "weak"
        samples = sum(e.sample_size or 0 for e in experiments)
        numbers = ", ".join(f"{e.name}: {e.result:g} vs {e.threshold:g}"
                            for e in experiments if e.threshold is not None)
        return ValidationSignal(
            strength=strength, confidence=round(min(0.95, 0.5 + samples / 2000), 2),
            rationale=f"{len(passed)} of {len(experiments)} experiments met their threshold "
                      f"({numbers}).",
            evidence_cited=[e.name for e in experiments])
    return judge


def _judge_viability(c: Context, feedback: str | None, rng: random.Random) -> ValidationSignal:
    e = ViabilityEvidence.model_validate(c["viability_evidence"])
    strength = ("strong" if e.ltv_cac_ratio >= 3 else "moderate" if e.ltv_cac_ratio >= 1.5
                else "weak")
    return ValidationSignal(
        strength=strength, confidence=0.7,
        rationale=f"LTV/CAC is {e.ltv_cac_ratio:g} (LTV ${e.ltv_usd:g}, CAC ${e.cac_usd:g}); "
                  f"payback in {e.payback_months:g} months.",
        evidence_cited=["ltv_cac_ratio", "payback_months"])


_PIVOT_FOR = {"desirability_signal": "customer_segment", "feasibility_signal": "technology",
              "viability_signal": "revenue_model"}


def _pivot(c: Context, feedback: str | None, rng: random.Random) -> PivotRecommendation:
    signals = {f: c.get(f) for f in _PIVOT_FOR}
    weak = [f for f, s in signals.items() if s is None or s.get("strength") == "weak"]
    decision = "proceed" if not weak else "pivot" if len(weak) == 1 else "kill"
    alternatives = []
    if decision == "pivot":
        pivot_type = _PIVOT_FOR[weak[0]]
        segments = (c.get("fit_assessment") or {}).get("alternative_segments") or []
        if pivot_type == "customer_segment" and segments:
            alternatives = [PivotAlternative(pivot_type=pivot_type, segment=s,
                                             description=f"Validate with {s} instead")
                            for s in segments]
        else:
            alternatives = [PivotAlternative(pivot_type=pivot_type,
                                             description=f"Rework the {pivot_type}")]
    described = "; ".join(f"{f.removesuffix('_signal')}: "
                          f"{(s or {}).get('strength', 'not judged')}"
                          for f, s in signals.items())
    return PivotRecommendation(
        decision=decision, pivot_type=alternatives[0].pivot_type if alternatives else None,
        rationale=f"{3 - len(weak)} of 3 validation signals hold ({described}).",
        alternatives=alternatives)


ANSWERS: dict[str, OfflineAnswer] = {
    "interview_founder": _interview,
    "draft_founders_brief": _brief,
    "profile_customer_segment": _profile,
    "design_value_map": _value_map,
    "assess_fit": _fit,
    "run_desirability_experiments": _desirability,
    "assess_technical_feasibility": _feasibility,
    "model_unit_economics": _economics,
    "judge_desirability": _judge_experiments("desirability_evidence"),
    "judge_feasibility": _judge_experiments("feasibility_evidence"),
    "judge_viability": _judge_viability,
    "recommend_pivot": _pivot,
}
