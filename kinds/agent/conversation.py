"""The people's side of an agent run: their messages in, the wait for the next one, and a
member who comes back after a while (seed 003, issue 29).

A part of `AgentRun` (kinds/agent/host.py): it numbers each message and writes its
`message.received` with its turn's first write (the first message's with `run.started` too),
waits for the next at no cost until the run's idle timeout, refuses a message the run does
not wait for, and tells when a message ends a wait past the run's return gap: that turn is
re-primed from the summary and the related entities instead of the transcript, and the agent
is told who speaks.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from waystation.kinds.agent.contracts import MEMBER_RETURNED, RETURNING_MEMBER
    from waystation.kinds.agent.host import AgentHost
    from waystation.kinds.agent.models import MessageAccepted, MessageInput
    from waystation.sdk import MESSAGE_RECEIVED, EventWrite
    from waystation.sdk.workflow import NOT_WAITING_FOR_MESSAGE

# Runs that got a message after a long wait before returning members were re-primed carried
# the whole transcript on: they replay so (seed 003, issue 29).
RETURNING_MEMBER_PATCH = "agent-returning-member"
# Runs that wrote a message's `message.received` in its Update's handler, and its turn's
# `thinking` state in a second local activity after it, replay so (issue 39).
MESSAGE_WITH_TURN_PATCH = "agent-message-with-turn"


class Conversation:
    """The messages a run has taken and waits for."""

    def __init__(self, host: AgentHost) -> None:
        self._host = host
        self._inbox: list[MessageInput] = []
        self._waiting_since: datetime | None = None
        # Who came back after a gap, for the turn that re-primes them (None on other turns).
        self.returning: str | None = None

    def open(self) -> None:
        """A new run's first message, from its input (a continuation has taken it already)."""
        arg = self._host.arg
        if arg.carry is None and arg.input.message:
            self._inbox.append(self._received(MessageInput(text=arg.input.message,
                                                           sent_by=arg.owner)))

    @property
    def has_message(self) -> bool:
        return bool(self._inbox)

    def next(self) -> MessageInput:
        """The next message to answer, noting whether its sender comes back after a gap."""
        message = self._inbox.pop(0)
        self.returning = message.sent_by if self._came_back() else None
        return message

    async def wait(self) -> bool:
        """Wait, paused, for the next message; False when none came within the idle timeout."""
        host = self._host
        host.waiting_for, host.phase = "message", "waiting for a message"
        host.life.status = "paused"
        self._waiting_since = workflow.now()
        await host.record(with_state=True)
        host.show(f"{host.arg.input.agent} · turn {host.carry.turn} · waiting for a message")
        try:
            await workflow.wait_condition(
                lambda: bool(self._inbox),
                timeout=timedelta(seconds=host.arg.input.idle_timeout_seconds),
                timeout_summary="conversation idle")
        except TimeoutError:
            return False
        host.life.status = "running"
        return True

    async def accept(self, message: MessageInput) -> MessageAccepted:
        """The `post_message` Update: a person's next message, written and queued."""
        self.check_waiting()  # a second message raced the first one in
        self._host.waiting_for = None
        accepted = self._received(message)
        carry = self._host.carry
        # Numbered now: the turn has begun by the time the write it travels with is done.
        answer = MessageAccepted(number=carry.messages, turn=carry.turn + 1)
        if workflow.patched(MESSAGE_WITH_TURN_PATCH):
            await self._written_with_turn(accepted)
        else:
            await self._host.record(events=[self._message_event(accepted)])
            self._inbox.append(accepted)
        return answer

    async def _written_with_turn(self, message: MessageInput) -> None:
        """Queue the message for its turn, whose first write (the `thinking` state) carries
        its `message.received`: one local activity and one transaction before the turn's
        first model request where there were two. The Update still answers only once that
        write is done, so the message is in the read model when its sender is told."""
        written = False

        def done() -> None:
            nonlocal written
            written = True
        # A run's first message is staged already (`_received`).
        first = self._host.carry.messages == 1
        self._host.stage(events=[] if first else [self._message_event(message)],
                         on_written=done)
        self._inbox.append(message)
        await workflow.wait_condition(lambda: written)

    def check_waiting(self) -> None:
        """Refuse a message unless the run waits for one (the Update's validator)."""
        host = self._host
        if host.waiting_for == "message":
            return
        doing = {"approval": "waits for an approval", None: f"is {host.phase}"}
        raise ApplicationError(f"the run is not waiting for a message: it "
                               f"{doing.get(host.waiting_for, 'is busy')}",
                               type=NOT_WAITING_FOR_MESSAGE, non_retryable=True)

    def _received(self, message: MessageInput) -> MessageInput:
        self._host.carry.messages += 1
        if self._host.carry.messages == 1:
            # The first message travels with run.started.
            self._host.stage(events=[self._message_event(message)])
        return message

    def _message_event(self, message: MessageInput) -> Any:
        carry = self._host.carry
        n = carry.messages
        return self._host.event(f"message.{n}", MESSAGE_RECEIVED, phase=carry.turn + 1,
                                agent=message.sent_by, status="received",
                                output={"number": n, "text": message.text,
                                        "sent_by": message.sent_by})

    # --- a member back after a while ----------------------------------------------------

    def _came_back(self) -> bool:
        """Whether the message ends a wait of at least the run's return gap: a member coming
        back, whose turn starts from the summary instead of the transcript."""
        gap = self._host.arg.input.return_gap_seconds
        if gap is None or self._waiting_since is None or not self._host.carry.context_summary:
            return False
        waited = (workflow.now() - self._waiting_since).total_seconds()
        # Asked only past the gap, so a run that never waits that long records no marker.
        return waited >= gap and workflow.patched(RETURNING_MEMBER_PATCH)

    def returned_event(self) -> EventWrite:
        """For a returning member's turn (the framework's transcript is set aside, kept in the
        run's events): counted, and an event says whom the run re-primed and from what."""
        assert self.returning is not None
        c = self._host.carry
        c.returns += 1
        return self._host.event(f"t{c.turn}.returned", MEMBER_RETURNED, phase=c.turn,
                                agent=self.returning, status="re-primed",
                                output={"turn": c.turn, "sent_by": self.returning,
                                        "context_summary": c.context_summary,
                                        "related_entity_ids": c.related_entity_ids})

    def priming(self) -> str | None:
        """Re-primed after a continuation or a member's return: the summary (last, as the
        agent reads it) and the related entities stand in for the turns left behind; on the
        returning turn, the agent is told who speaks. A fork starts so too: it carries the
        source's summary, not its messages."""
        c = self._host.carry
        carried_on = c.continued or c.returns or self._host.arg.forked_from is not None
        if not carried_on or not c.context_summary:
            return None
        lines = []
        if self.returning is not None:
            lines.append(f"{RETURNING_MEMBER} {self.returning}, back after a while: greet "
                         "them by name with where things stand, then answer them.")
        if c.related_entity_ids:
            lines.append("Related entities: " + "; ".join(
                f"{kind}: {', '.join(ids)}" for kind, ids in c.related_entity_ids.items()))
        return "\n".join([*lines, f"Summary so far: {c.context_summary}"])
