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

from tests.helpers import eventually
from tests.tools.history_recording import gate_opened_deliveries, gated_run, write_history
from tests.webhook_receiver import Receiver
from waystation.testing import local_stack


async def main() -> None:
    with Receiver(fail_first=2) as receiver:
        async with local_stack() as stack, stack.client("recorder") as http:
            hook = await http.post("/webhooks", json={"url": receiver.url,
                                                      "events": ["gate.opened"]})
            assert hook.status_code == 201, hook.text
            run = await gated_run(http)
            await eventually(lambda: asyncio.sleep(0, any(
                r.answered == 204 for r in receiver.received)), timeout=60)
            handle = gate_opened_deliveries(stack, run, receiver)
            await handle.result()
            history = await handle.fetch_history()
    write_history("webhooks_retried_after_local_attempt", history)

if __name__ == "__main__":
    asyncio.run(main())
