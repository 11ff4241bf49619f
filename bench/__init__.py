"""Benchmarks: each prints Waystation's figure beside a baseline measured in the same run.

The offline planner writes its answers a word every WAYSTATION_OFFLINE_TOKEN_MS (8 ms by
default, so the demo shows tokens arriving). The peers' offline models answer whole at once,
so here the planner does too unless the caller sets a pace: a comparison of orchestration must
not time a pretend model's typing on one side only.
"""

import os

os.environ.setdefault("WAYSTATION_OFFLINE_TOKEN_MS", "0")
