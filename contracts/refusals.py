"""The `ApplicationError` types with which a run's Update validators and handlers refuse a
request. Workflows raise them; the API maps each to an error code in one place
(`api/services/workflow_updates.py`). They are part of recorded histories: never rename one.
"""

from __future__ import annotations

# A gate's decision, delegation or re-opening (workflows/gate_rules.py, workflows/gate_handlers.py).
UNKNOWN_CHECKPOINT = "UnknownCheckpoint"
GATE_NOT_PENDING = "GateNotPending"
UNKNOWN_OPTION = "UnknownOption"
STALE_REQUEST = "StaleRequest"
INVALID_ANSWER = "InvalidAnswer"
INVALID_FEEDBACK = "InvalidFeedback"
ALREADY_VOTED = "AlreadyVoted"
NOT_ALLOWED = "NotAllowed"
INVALID_DELEGATION = "InvalidDelegation"
# An agent run's next message while it is not waiting for one (kinds/agent/workflow.py).
NOT_WAITING_FOR_MESSAGE = "NotWaitingForMessage"
# Pausing a batch job that is not running, or resuming one that is not paused
# (kinds/batch/workflow.py).
JOB_NOT_RUNNING = "JobNotRunning"
