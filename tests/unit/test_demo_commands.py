"""The commands `waystation demo` prints are pasted into a shell: each must carry its body
intact, whatever quotes the body holds."""

from __future__ import annotations

import json
import shlex

import httpx

from waystation.demo import DemoSession


def test_a_printed_curl_gives_the_shell_its_body_intact() -> None:
    session = DemoSession(http=httpx.Client(), api="http://127.0.0.1:8000", token="tok")
    body = {"text": "it's \"quoted\" and $HOME stays text", "decision": "edit"}
    words = shlex.split(session.curl("POST", "/runs/r1/messages", body))
    assert words[:4] == ["curl", "-X", "POST", "http://127.0.0.1:8000/runs/r1/messages"]
    assert words[words.index("-H") + 1] == "Authorization: Bearer tok"
    assert json.loads(words[words.index("-d") + 1]) == body
