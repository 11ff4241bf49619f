"""What each validation checkpoint asks the human, built from the run's state."""

from __future__ import annotations

from datetime import timedelta

from contracts.writes import GateOption
from workflows.gates import GateSpec
from workflows.validation_models import ValidationInput, ValidationRunState
from workflows.validation_phases import PhaseDef, segment_option, signal_of

APPROVE = GateOption(value="approve", label="Approve", description="Continue to the next phase.")
REJECT = GateOption(value="reject", label="Reject",
                    description="Re-run this phase with your feedback (bounded retries).")
OVERRIDE = GateOption(value="override_proceed", label="Proceed anyway",
                      description="Continue although the evidence is weak; recorded as an "
                                  "override.")


def gate_spec(phase: PhaseDef, state: ValidationRunState, run_input: ValidationInput) -> GateSpec:
    options = [APPROVE, REJECT]
    recommended = "approve"
    context: dict = {"phase": phase.number, "phase_name": phase.name,
                     "attempt": state.phase_attempts.get(phase.number, 1)}
    title = f"Review phase {phase.number}: {phase.name.replace('_', ' ')}"
    description = f"Phase {phase.number} ({phase.name}) finished. Approve to continue."
    if phase.number == 0:
        title = "Approve the founder's brief"
        description = "Check the brief the onboarding crew drafted from your idea."
        context["founders_brief"] = state.founders_brief
    elif phase.number == 1:
        title = "Approve the value proposition canvas"
        description = ("Approve the customer profile and value map, pick another customer "
                       "segment to explore, or reject with feedback.")
        fit = state.fit_assessment or {}
        context.update(customer_profile=state.customer_profile, value_map=state.value_map,
                       fit_assessment=fit)
        for segment in fit.get("alternative_segments", []):
            options.append(GateOption(value=segment_option(segment), label=segment,
                                      description=f"Re-run discovery for {segment}."))
        if fit.get("fit_score", 100) < 60:
            recommended = "reject"
    else:
        field = {2: "desirability", 3: "feasibility", 4: "viability"}[phase.number]
        signal = signal_of(getattr(state, f"{field}_signal"))
        title = f"{field.capitalize()} gate: the signal is {signal}"
        description = (f"The {field} evidence reads {signal}. Approve to continue, override "
                       "to continue despite weak evidence, or reject to re-run the phase.")
        context.update(evidence=getattr(state, f"{field}_evidence"),
                       signal=getattr(state, f"{field}_signal"))
        options.append(OVERRIDE)
        if signal == "weak":
            recommended = "reject"
    return GateSpec(
        checkpoint_name=phase.checkpoint, phase=phase.number, title=title,
        description=description, context=context, options=options,
        recommended_option=recommended,
        expires_in=timedelta(seconds=run_input.gate_timeout_seconds),
        expiry_policy=run_input.expiry_policy,
        default_option=recommended if run_input.expiry_policy == "default" else None)

