"""Record the histories of a webhook fan-out shared among child workflows (issue 38) for the
replay test: `python -m tests.tools.record_fan_out_histories`.

A whole local stack whose worker sends at most 2 deliveries per workflow
(WAYSTATION_WEBHOOK_DELIVERIES_PER_WORKFLOW), and 3 webhooks for `gate.opened` whose receiver
refuses the recorder's first attempts: the event's workflow shares the 3 deliveries between two
children. Writes tests/histories/webhooks_fan_out_shared.json
(the event's workflow) and webhooks_fan_out_share.json (its first child). Re-record only on
purpose, and check them in.
"""

from __future__ import annotations

import asyncio
import os

from tests.helpers import eventually
from tests.tools.history_recording import gate_opened_deliveries, gated_run, write_history
from tests.webhook_receiver import Receiver
from waystation.testing import local_stack

HOOKS = 3


async def main() -> None:
    os.environ["WAYSTATION_WEBHOOK_DELIVERIES_PER_WORKFLOW"] = "2"  # read by build_worker
    with Receiver(fail_first=HOOKS) as receiver:
        async with local_stack() as stack, stack.client("recorder") as http:
            for _ in range(HOOKS):
                hook = await http.post("/webhooks", json={"url": receiver.url,
                                                          "events": ["gate.opened"]})
                assert hook.status_code == 201, hook.text
            run = await gated_run(http)
            await eventually(lambda: asyncio.sleep(0, sum(
                r.answered == 204 for r in receiver.received) >= HOOKS), timeout=60)
            handle = gate_opened_deliveries(stack, run, receiver)
            await handle.result()
            histories = {
                "webhooks_fan_out_shared": await handle.fetch_history(),
                "webhooks_fan_out_share": await stack.temporal.get_workflow_handle(
                    f"{handle.id}-share-0").fetch_history()}
    for name, history in histories.items():
        write_history(name, history)


if __name__ == "__main__":
    asyncio.run(main())
