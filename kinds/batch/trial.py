"""A batch job's test item: item 0 alone before the others, and the gate its failure opens.

A part of `BatchJob` (kinds/batch/host.py), for a job whose spec asks for a test item first
(seed 004: test-unit-first). If item 0 fails, a person decides whether the other items run
anyway or the job is aborted; a fork may bring that decision with it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.batch.host import BatchHost
    from waystation.kinds.batch.slices import Slices
    from waystation.sdk import GateOption, GateSpec

TEST_GATE = "test_unit_failed"


class FirstItem:
    """The test item: item 0 first, and what a person says when it fails."""

    def __init__(self, host: BatchHost, slices: Slices) -> None:
        self._host, self._slices = host, slices

    async def run(self) -> None:
        """Run item 0 alone; if it fails, a human decides whether the rest should run."""
        host = self._host
        p = host.counts
        p.next_ordinal = 1
        host.show("test item")
        error = await self._slices.alone(0)
        p.test_done = True
        if error is None:
            return
        outcome = await host.ask_human(lambda: self._gate(error), where="test item",
                                       decided=host.take_decided(TEST_GATE))
        if outcome.decision is None or outcome.decision.decision == "abort":
            await host.fail(f"aborted after the test item failed: {error}",
                            stop_reason="aborted_after_test_item", result=host.result("failed"))

    def _gate(self, error: str) -> GateSpec:
        host = self._host
        return GateSpec(
            checkpoint_name=TEST_GATE, phase=0, title=f"Test item of {host.spec.name} failed",
            description=f"Item 0 failed: {error}. Run the other {host.counts.total - 1} items "
                        "anyway, or abort the job?",
            context={"item_ordinal": 0, "error": error, "total": host.counts.total},
            options=[GateOption(value="proceed", label="Proceed with all items"),
                     GateOption(value="abort", label="Abort the job")],
            recommended_option="abort", rejecting_options=["abort"],
            expires_in=timedelta(seconds=host.spec.gate_timeout_seconds),
            expiry_policy="pause")
