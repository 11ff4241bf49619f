"""Record a WebhookNotification history for the replay test:
`python -m tests.tools.record_notification_histories`.

A whole local stack (waystation.testing.local_stack) and a receiver that fails twice, then
answers 204: the history of a `gate.opened` event's deliveries, retried, is written to
tests/histories/webhooks_retried_after_local_attempt.json (the first attempt a local
activity, the retries regular ones). `webhooks_retried_delivery.json` beside it is the history
of the release before, every attempt a regular activity: kept, never re-recorded. Re-record
only on purpose, and check it in.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.helpers import IDEA, eventually
from tests.webhook_receiver import Receiver
from waystation.testing import local_stack

FOLDER = Path(__file__).resolve().parents[1] / "histories"


async def main() -> None:
    with Receiver(fail_first=2) as receiver:
        async with local_stack() as stack, stack.client("recorder") as http:
            hook = await http.post("/webhooks", json={"url": receiver.url,
                                                      "events": ["gate.opened"]})
            assert hook.status_code == 201, hook.text
            run = (await http.post("/runs", json={"kind": "validation", "input": {
                "entrepreneur_input": IDEA, "gates": ["approve_founders_brief"]}})).json()
            await eventually(lambda: asyncio.sleep(0, any(
                r.answered == 204 for r in receiver.received)), timeout=60)
            request_id = json.loads(receiver.received[-1].body)["data"]["request_id"]
            handle = stack.temporal.get_workflow_handle(
                f"webhooks-{run['run_id']}-gate.opened:{request_id}")
            await handle.result()
            history = await handle.fetch_history()
    path = FOLDER / "webhooks_retried_after_local_attempt.json"
    path.write_text(history.to_json() + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())
