"""Output checks: what a stored answer is flagged for (seed 002's QA, at the time of writing).

A flag does not fail the item: the answer may be right (code that uses `{name}` on purpose),
so it is kept, marked, and listed (`GET /jobs/{id}/items?flagged=true`) for a person to judge,
and a re-run from that step (`POST /jobs/{id}/rerun`) replaces it.
"""

from __future__ import annotations

import re

from waystation.kinds.batch.output_flags import OutputFlag

UNRENDERED_PLACEHOLDER = "unrendered_placeholder"
# Template syntax an answer should never contain: a Jinja expression, statement or comment,
# or a `{name}` / `${name}` placeholder of str.format and most other template languages, the
# form of the seed's "{session_9_output}". JSON objects do not match: their keys are quoted.
_PLACEHOLDER = re.compile(r"\{\{.{0,200}?\}\}|\{%.{0,200}?%\}|\{#.{0,200}?#\}"
                          r"|\$?\{[A-Za-z_][A-Za-z0-9_.]{0,100}\}", re.DOTALL)
# At most this many distinct placeholders are named in a flag.
MAX_NAMED = 5


def output_flags(step: str, text: str) -> list[OutputFlag]:
    """The flags of one step's answer (none for a clean one)."""
    found = list(dict.fromkeys(m.group(0) for m in _PLACEHOLDER.finditer(text)))[:MAX_NAMED]
    if not found:
        return []
    return [OutputFlag(
        check=UNRENDERED_PLACEHOLDER, step=step, found=found,
        reason=f"the answer of step {step!r} contains template syntax ({', '.join(found)}): "
               "a placeholder that was never filled in, in the prompt the model answered or "
               "in the model's answer")]
