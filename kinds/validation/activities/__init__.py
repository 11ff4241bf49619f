"""The validation crew's side effects: one crew task through the agent backend, its typed
outputs and its prompts."""
