"""Search attributes every run sets, so operators can filter runs in the Temporal Web UI."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

KIND = SearchAttributeKey.for_keyword("WaystationKind")
STATUS = SearchAttributeKey.for_keyword("WaystationStatus")
PHASE = SearchAttributeKey.for_int("WaystationPhase")
OWNER = SearchAttributeKey.for_keyword("WaystationOwner")
AWAITING_HUMAN = SearchAttributeKey.for_bool("WaystationAwaitingHuman")

ALL = (KIND, STATUS, PHASE, OWNER, AWAITING_HUMAN)
