"""bench_peers times a person's message → the model's first request the same way for every
system: a streamed request (Waystation's model requests since issue 43) is noted as a whole
one is (the peers' requests, Waystation's summary)."""

from __future__ import annotations

import time

from pydantic_ai.messages import ModelMessagesTypeAdapter

from bench import peer_agent


async def test_a_streamed_request_is_noted() -> None:
    messages = ModelMessagesTypeAdapter.validate_python(
        peer_agent.user_message(peer_agent.MESSAGES[0]))
    peer_agent.FIRST_REQUEST.reset()
    sent = time.perf_counter()
    async with peer_agent._model().request_stream(messages, None,
                                                   peer_agent.PARAMETERS) as stream:
        assert peer_agent.FIRST_REQUEST.at is not None
        async for _ in stream:
            pass
    assert 0 <= peer_agent.FIRST_REQUEST.since(sent) < 1000


async def test_a_whole_request_is_noted() -> None:
    peer_agent.FIRST_REQUEST.reset()
    sent = time.perf_counter()
    await peer_agent.model_request(peer_agent.user_message(peer_agent.MESSAGES[0]))
    assert 0 <= peer_agent.FIRST_REQUEST.since(sent) < 1000
