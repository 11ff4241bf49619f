"""The service layer: what Waystation does, once, under every interface.

The REST routes (`api/routes/`), the console (which calls the REST API) and the protocol
endpoints (AG-UI, MCP, A2A) all call these functions and never a copy of them; a route or an
adapter only turns its transport's request into arguments and the result back into its
transport's answer.

The contract of every function here:
- **Inputs are explicit**: an asyncpg connection on which the caller's claims are already set
  (row-level security: `access.claims_of(user)`; only `decision_links` and `slack`, whose
  caller is known by the link, or by Slack's signature, alone, start from the authenticator's
  claims), the Temporal client, the
  `waystation.api.auth.User` it acts for, the `Registry` / `Settings` when it needs them, and at
  most one pydantic request model (a body from `waystation.api.schemas`, or a filter / page from
  `waystation.api.queries`) plus the path's ids.
- **A run or job argument has passed the visibility check**: get it from
  `runs.visible_run(conn, user, run_id)` (a kind's own service has its own, as the batch
  kind's `waystation.kinds.batch.service.visible_job`), which
  answer 404 for one the caller may not read, exactly as for one that does not exist. Rules of
  who may act (`access.require_decider`, ...) are applied inside each function.
- **Outputs** are the pydantic view models the REST API returns (`waystation.api.schemas`; a kind's
  own in its package).
- **Refusals** are raised as `waystation.api.errors.ApiError` (status, code, message, details): an
  HTTP status for REST, and a stable `code` a protocol maps to its own error. What Temporal answers
  is mapped to `ApiError` in one place, `workflow_updates.temporal_refusal` (a guard test,
  tests/unit/test_layers.py, holds every `except RPCError` to it). Temporal or the database being
  unreachable may still escape as `temporalio.service.RPCError` or a driver error:
  `waystation.api.errors.as_api_error(error)` maps those (503, or 502 for another Temporal refusal)
  for REST and every adapter alike; None means a bug.
- **No transport objects**: no FastAPI `Request`, `Response`, `Depends` or headers; what a
  header carries (an Idempotency-Key) is a keyword argument.
"""
