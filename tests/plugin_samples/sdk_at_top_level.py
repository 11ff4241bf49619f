"""A workflow module that imports every module of the SDK at its top, outside
`imports_passed_through()`, as a plug-in's models module may: Temporal's sandbox re-imports all
of it for every run (tests/unit/test_sdk_surface.py)."""

from __future__ import annotations

from temporalio import workflow

import waystation.sdk.agents
import waystation.sdk.artifacts
import waystation.sdk.gates
import waystation.sdk.mcp
import waystation.sdk.reads
import waystation.sdk.routes
import waystation.sdk.schemas
import waystation.sdk.services
import waystation.sdk.testing
import waystation.sdk.workflow
import waystation.sdk.writes
from waystation.sdk import DecisionInput

SDK = (waystation.sdk.agents, waystation.sdk.artifacts, waystation.sdk.gates, waystation.sdk.mcp,
       waystation.sdk.reads, waystation.sdk.routes, waystation.sdk.schemas, waystation.sdk.services,
       waystation.sdk.testing, waystation.sdk.workflow, waystation.sdk.writes)


@workflow.defn(name="SdkAtTopLevel", sandboxed=True)
class SdkAtTopLevel:
    @workflow.run
    async def run(self, decision: DecisionInput) -> str:
        return decision.option
