"""The built-in run kinds, each one package shaped like an outside plug-in (see
docs/architecture.md): its workflow, models, activities, descriptor, routes, queries,
migrations and console module. They are registered through the `waystation.run_kinds` entry
point of the root `pyproject.toml` (`builtin = "waystation.kinds:builtin_kinds"`), as a plug-in is;
the core imports none of them.
"""

from __future__ import annotations

from typing import Any


def builtin_kinds() -> list[Any]:
    """Every built-in kind, in the order `POST /runs` and `waystation kinds` list them.
    Imported here, not at the top: a kind's workflow module is re-imported in Temporal's
    sandbox, and this package's import must stay free of side effects."""
    from waystation.kinds.agent.kind import AGENT
    from waystation.kinds.batch.kind import BATCH
    from waystation.kinds.mobile.kind import MOBILE
    from waystation.kinds.validation.kind import VALIDATION

    return [VALIDATION, BATCH, MOBILE, AGENT]
