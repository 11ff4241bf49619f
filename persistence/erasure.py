"""Repository functions for erasing one user's personal rows beyond their runs (their runs go
through waystation.persistence.retention): access ends at the request, the rest after the grace
period.

What erasure means for each kind of row: what is only the user's (contact address, decision
links, group memberships, API keys, console sessions and codes, their own webhooks and what
those delivered, their own decision policies and their runs' decision roll-ups) is deleted;
where the user appears in someone else's record (a decision, vote or delegation on another's
run, the gate events and snapshots of that run, webhook payloads about it, a group they made
or a member they added, a group's webhook or decision policy they registered) the name is
replaced by the request's pseudonym, so that record stays whole.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from waystation.persistence import token_cutoffs
from waystation.persistence.queries import sql

# Run at the request, in its transaction: nothing signed in as the user works from then on,
# no mailed link decides as them, and no group of theirs lets a later holder of the same name
# in. Keys are revoked before memberships end (see migration 035's trigger).
END_ACCESS = ("end_user_sessions", "drop_user_login_codes", "revoke_user_api_keys",
              "delete_user_decision_links", "delete_user_memberships", "stop_user_webhooks",
              "delete_user_slack_links", "stop_user_policies")
# Run after the grace period, in one transaction per user. Deliveries before their webhooks
# (no cascade between them).
DELETE_PERSONAL = ("delete_user_contact", "delete_user_decision_links",
                   "delete_user_memberships", "delete_user_api_keys", "end_user_sessions",
                   "drop_user_login_codes", "delete_user_webhook_deliveries",
                   "delete_user_webhooks", "delete_user_slack_links", "delete_user_policies",
                   "delete_user_decision_rollups")
PSEUDONYMIZE = ("pseudonymize_user_in_groups", "pseudonymize_user_in_members",
                "pseudonymize_user_in_group_webhooks", "pseudonymize_user_in_requests",
                "pseudonymize_user_in_votes", "pseudonymize_user_in_delegations",
                "pseudonymize_user_in_gate_events", "pseudonymize_user_in_snapshots",
                "pseudonymize_user_in_deliveries", "pseudonymize_user_in_group_policies",
                "pseudonymize_user_in_policy_versions")


async def request_erasure(conn: asyncpg.Connection, user: str) -> None:
    """Note the request (kept until carried out) and end the user's access now: their signed
    tokens too, which cannot be deleted, by a cut-off their user row keeps."""
    await conn.fetchval(sql("request_user_erasure"), user)
    for query in END_ACCESS:
        await conn.execute(sql(query), user)
    await token_cutoffs.cut_off_tokens(conn, user)


async def erase_due_users(pool: asyncpg.Pool, *, requested_before: datetime) -> int:
    """Carry out the requests older than `requested_before` whose hidden runs are deleted;
    returns how many users were erased now. Each user's rows change in one transaction, and
    the request is forgotten in it, so a retried sweep finds only what is left to do."""
    async with pool.acquire() as conn:
        due = await conn.fetch(sql("erasures_due"), requested_before)
    erased = 0
    for row in due:
        user, pseudonym = row["user_name"], row["pseudonym"]
        async with pool.acquire() as conn, conn.transaction():
            if await conn.fetchval(sql("user_has_erased_runs"), user):
                continue  # the sweep's next batches delete them first
            for query in DELETE_PERSONAL:
                await conn.execute(sql(query), user)
            for query in PSEUDONYMIZE:
                await conn.execute(sql(query), user, pseudonym)
            await conn.execute(sql("forget_user_erasure"), user)
        erased += 1
    return erased
