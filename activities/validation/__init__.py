"""The validation crew's task outputs, prompts and offline answers (seed 000)."""
