"""An app's package name: what a kind that explores apps takes as input, and the runs list
filters by (the mobile kind's `run_filters`)."""

from __future__ import annotations

PACKAGE_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$"
