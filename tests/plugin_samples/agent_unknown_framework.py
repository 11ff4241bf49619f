"""A plug-in whose agent is of no framework Waystation runs."""


class HomeMadeAgent:
    def run(self, prompt: str) -> str:
        return prompt


AGENTS = {"home_made": HomeMadeAgent()}
