"""An agent backend a plug-in registers (entry point `waystation.agent_backends`): it writes
drafts in a house style, deterministically, with no network. Choose it for every task with
`WAYSTATION_AGENT_BACKEND=house_style`; a real model plugs in the same way."""

from __future__ import annotations

from typing import Any

from waystation.sdk import AgentRequest, AgentResponse, ProgressReporter


class HouseStyleBackend:
    name = "house_style"

    def __init__(self, settings: Any = None) -> None:
        self.settings = settings

    async def run(self, request: AgentRequest,
                  progress: ProgressReporter | None = None) -> AgentResponse:
        return AgentResponse(output=write_draft(request.context), model="house_style")


def write_draft(context: dict[str, Any]) -> dict[str, Any]:
    """A short article on the topic for the audience, revised by the reviewer's feedback."""
    topic, audience = str(context.get("topic", "")), str(context.get("audience", ""))
    paragraphs = [f"{topic.capitalize()} matters to {audience} more than it seems.",
                  f"Here is what {audience} should know about {topic}, in three points."]
    if context.get("feedback"):
        paragraphs.append(f"Revised after review: {context['feedback']}")
    return {"title": f"{topic.capitalize()}: a guide for {audience}",
            "body": "\n\n".join(paragraphs)}
