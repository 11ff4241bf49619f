"""What each validation checkpoint asks the human, derived from the run's typed evidence.

Every recommendation says why (`context.recommendation_reason`), from the numbers the crew
produced: the fit score and its gaps, each phase's signal with its confidence, the pivot
recommendation. Missing evidence (a skipped task) is named as such and never read as good.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from waystation.kinds.validation.models import ValidationInput, ValidationRunState
from waystation.kinds.validation.phases import PhaseDef, TaskDef, segment_option
from waystation.sdk import GateOption, GateSpec

APPROVE = GateOption(value="approve", label="Approve", description="Continue to the next phase.")
REJECT = GateOption(value="reject", label="Reject",
                    description="Re-run this phase with your feedback (bounded retries).")
OVERRIDE = GateOption(value="override_proceed", label="Proceed anyway",
                      description="Continue although the evidence is weak; recorded as an "
                                  "override.")
# Below this fit score the canvas is not approved as it stands.
FIT_THRESHOLD = 60
# A moderate signal held with less confidence than this is re-run rather than approved.
MIN_CONFIDENCE = 0.5
EVIDENCE_OF = {2: "desirability", 3: "feasibility", 4: "viability"}


def gate_spec(phase: PhaseDef, state: ValidationRunState, run_input: ValidationInput) -> GateSpec:
    context: dict[str, Any] = {"phase": phase.number, "phase_name": phase.name,
                               "attempt": state.phase_attempts.get(phase.number, 1)}
    if phase.number == 0:
        title, description, options, recommended, reason = _brief_gate(state, context)
    elif phase.number == 1:
        title, description, options, recommended, reason = _canvas_gate(state, context)
    else:
        title, description, options, recommended, reason = _evidence_gate(phase, state, context)
    context["recommendation_reason"] = reason
    return GateSpec(
        checkpoint_name=phase.checkpoint, phase=phase.number, title=title,
        description=description, context=context, options=options,
        recommended_option=recommended,
        expires_in=timedelta(seconds=run_input.gate_timeout_seconds),
        expiry_policy=run_input.expiry_policy,
        default_option=recommended if run_input.expiry_policy == "default" else None)


Gate = tuple[str, str, list[GateOption], str, str]


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json") if model is not None else None


def _brief_gate(state: ValidationRunState, context: dict[str, Any]) -> Gate:
    brief = state.founders_brief
    context.update(founders_brief=_dump(brief), founder_interview=_dump(state.founder_interview))
    if brief is None:
        return ("Approve the founder's brief", "No brief was drafted.", [APPROVE, REJECT],
                "reject", "there is no brief to approve")
    return ("Approve the founder's brief",
            "Check the brief the onboarding crew drafted from your idea.", [APPROVE, REJECT],
            "approve", f"the brief states {len(brief.key_assumptions)} testable assumptions "
                       f"and {len(brief.success_criteria)} success criteria")


def _canvas_gate(state: ValidationRunState, context: dict[str, Any]) -> Gate:
    fit = state.fit_assessment
    context.update(customer_profile=_dump(state.customer_profile),
                   value_map=_dump(state.value_map), fit_assessment=_dump(fit))
    options = [APPROVE, REJECT]
    title = "Approve the value proposition canvas"
    description = ("Approve the customer profile and value map, pick another customer "
                   "segment to explore, or reject with feedback.")
    if fit is None:
        return (title, description + " Fit was not assessed.", options, "reject",
                "fit was not assessed, so the canvas is unproven")
    for segment in fit.alternative_segments:
        options.append(GateOption(value=segment_option(segment), label=segment,
                                  description=f"Re-run discovery for {segment}."))
    gaps = f"; gaps: {', '.join(fit.gaps)}" if fit.gaps else ""
    if fit.fit_score >= FIT_THRESHOLD:
        return (title, description, options, "approve",
                f"fit score {fit.fit_score} ≥ {FIT_THRESHOLD} for {fit.segment}{gaps}")
    if fit.alternative_segments:
        best = fit.alternative_segments[0]
        return (title, description, options, segment_option(best),
                f"fit score {fit.fit_score} < {FIT_THRESHOLD} for {fit.segment}{gaps}; "
                f"{best} is the best alternative segment")
    return (title, description, options, "reject",
            f"fit score {fit.fit_score} < {FIT_THRESHOLD} for {fit.segment}{gaps}")


def _evidence_gate(phase: PhaseDef, state: ValidationRunState,
                   context: dict[str, Any]) -> Gate:
    field = EVIDENCE_OF[phase.number]
    signal = getattr(state, f"{field}_signal")
    context.update(evidence=_dump(getattr(state, f"{field}_evidence")), signal=_dump(signal))
    options = [APPROVE, REJECT, OVERRIDE]
    if phase.number == 4:
        context["pivot_recommendation"] = _dump(state.pivot_recommendation)
    strength = signal.strength if signal is not None else "not judged"
    title = f"{field.capitalize()} gate: the signal is {strength}"
    description = (f"The {field} evidence reads {strength}. Approve to continue, override "
                   "to continue despite weak evidence, or reject to re-run the phase.")
    if signal is None:
        return (title, description, options, "reject",
                f"the {field} evidence was not judged")
    why = f"{strength} signal at confidence {signal.confidence:.2f}: {signal.rationale}"
    rec = state.pivot_recommendation if phase.number == 4 else None
    if rec is not None:
        description += f" The crew recommends to {rec.decision}: {rec.rationale}"
    if signal.strength == "weak":
        return title, description, options, "reject", why
    if signal.strength == "moderate" and signal.confidence < MIN_CONFIDENCE:
        return (title, description, options, "reject",
                f"{why} (confidence below {MIN_CONFIDENCE})")
    return title, description, options, "approve", why


TASK_FAILED = "task_failed"


def task_failed_gate_spec(phase: PhaseDef, task: TaskDef, error: str,
                          run_input: ValidationInput) -> GateSpec:
    """A task that failed for good: retry it, skip it (when the run can do without its
    output), or abort the run."""
    options = [GateOption(value="retry", label="Retry the task",
                          description="Run the task again from the start.")]
    if task.skippable:
        options.append(GateOption(value="skip", label="Skip the task",
                                  description=f"Go on without {task.fills}; later steps "
                                              "see it as missing."))
    options.append(GateOption(value="abort", label="Abort the run",
                              description="End the run as failed."))
    return GateSpec(
        checkpoint_name=TASK_FAILED, phase=phase.number, title=f"{task.task} failed",
        description=f"The {task.crew} crew's task {task.task} failed: {error}",
        context={"phase": phase.number, "crew": task.crew, "task": task.task, "error": error},
        options=options, recommended_option="retry", rejecting_options=["abort"],
        expires_in=timedelta(seconds=run_input.gate_timeout_seconds),
        expiry_policy=run_input.expiry_policy,
        default_option="retry" if run_input.expiry_policy == "default" else None)

