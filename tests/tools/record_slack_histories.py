"""Record a SlackNotification history for the replay test:
`python -m tests.tools.record_slack_histories`.

A whole local stack (waystation.testing.local_stack) with Slack's Web API played by
tests/slack_stub.py, down (HTTP 500) when the gate opens and rate limiting (429) a moment
after: the recorder's own attempt fails, and the workflow's retries post the message. Written to
tests/histories/slack_retried_through_outage.json. Re-record only on purpose, and check it in.
"""

from __future__ import annotations

import asyncio

from tests.helpers import eventually
from tests.slack_stub import TOKEN, SlackStub
from tests.tools.history_recording import gated_run, write_history
from waystation.testing import local_stack


async def main() -> None:
    with SlackStub() as stub:
        async with local_stack(slack_bot_token=TOKEN, slack_channel="CGATES",
                               slack_api_url=stub.url) as stack, \
                stack.client("recorder") as http:
            stub.outage(2.5, status=500)
            run = await gated_run(http)
            await eventually(lambda: asyncio.sleep(0, bool(stub.top_level())), timeout=60)
            found = [w async for w in stack.temporal.list_workflows(
                f"WorkflowType = 'SlackNotification' AND WorkflowId STARTS_WITH "
                f"'slack-{run['run_id']}'")]
            handle = stack.temporal.get_workflow_handle(found[0].id)
            await handle.result()
            history = await handle.fetch_history()
    write_history("slack_retried_through_outage", history)


if __name__ == "__main__":
    asyncio.run(main())
