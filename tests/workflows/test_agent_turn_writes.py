"""An agent turn's recorder writes (issue 39): a follow-up message's `message.received` goes
out with its turn's `thinking` state, and a turn's answer with the run's next write (the wait
for the next message, or the run's end): one local activity and one transaction each, where
there were two, on the time-skipping server with the real read model."""

from __future__ import annotations

import json

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from tests.agent_helpers import (
    AVAILABILITY,
    LIKE,
    SEARCH,
    events_of,
    new_agent_run,
    run_row,
    say,
    start_agent,
    waiting_recorded,
)


def _recorder_writes(history: WorkflowHistory, since: EventType.ValueType,
                     until: EventType.ValueType) -> list[int]:
    """For each event of type `until` after one of type `since`: the recorder's local
    activities (their markers) between the last `since` and it."""
    counts: list[int] = []
    counting: int | None = None
    for event in history.events:
        if event.event_type == since:
            counting = 0
        elif event.event_type == until and counting is not None:
            counts.append(counting)
            counting = None
        elif counting is not None and event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            if marker.marker_name == "core_local_activity" and json.loads(
                    marker.details["data"].payloads[0].data)["activity_type"] == "record":
                counting += 1
    return counts


async def test_a_message_and_its_turns_state_and_an_answer_and_the_wait_are_one_write_each(
        time_env, pool, worker, task_queue):
    arg = await new_agent_run(pool, message=SEARCH)
    handle = await start_agent(time_env.client, arg, task_queue)
    await say(handle, LIKE)
    # The Update answered only once its message was written.
    received = [e for e in await events_of(pool, arg.run_id) if e.type == "message.received"]
    assert [e.output["number"] for e in received] == [1, 2]
    await say(handle, AVAILABILITY)
    row = await waiting_recorded(pool, arg.run_id, turn=3)

    history = await handle.fetch_history()
    # From each message's Update to its turn's first model request: one write (the message
    # with the turn's `thinking` state), not two.
    assert _recorder_writes(history, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
                            EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) == [1, 1]
    # From each turn's summary request to the wait for the next message (its idle timer): one
    # write (the answer with the run's state waiting), not two.
    assert _recorder_writes(history, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
                            EventType.EVENT_TYPE_TIMER_STARTED) == [1, 1, 1]

    events = await events_of(pool, arg.run_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    # Each turn opens with its message and closes with its answer, in seq order.
    turns = [(e.type, e.phase) for e in events if e.type in ("message.received",
                                                              "agent.answered")]
    assert turns == [("message.received", 1), ("agent.answered", 1),
                     ("message.received", 2), ("agent.answered", 2),
                     ("message.received", 3), ("agent.answered", 3)]
    # The answer and the wait committed together: the row's last change is the answer's
    # transaction.
    answered = [e for e in events if e.type == "agent.answered"][-1]
    assert (row.status, row.phase_name) == ("paused", "waiting for a message")
    assert row.updated_at == answered.created_at
    await handle.terminate("done")


async def test_the_last_turns_answer_is_written_with_the_runs_end(time_env, pool, worker,
                                                                  task_queue):
    arg = await new_agent_run(pool, message=SEARCH, max_turns=2)
    handle = await start_agent(time_env.client, arg, task_queue)
    await say(handle, LIKE)
    await handle.result()
    events = await events_of(pool, arg.run_id)
    assert [e.type for e in events][-2:] == ["agent.answered", "run.completed"]
    answered, completed = events[-2:]
    assert answered.created_at == completed.created_at  # one transaction
    row = await run_row(pool, arg.run_id)
    assert (row.status, row.stop_reason) == ("completed", "max_turns")
