"""An app's package name, as a run's `app_package` holds it (migration 050): what `GET /runs`
filters by and what a kind that explores apps takes as input."""

from __future__ import annotations

PACKAGE_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$"
