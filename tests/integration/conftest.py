"""The integration tests' in-process API: the `settings` and `api` fixtures, defined once in
tests/inprocess_api.py (the mobile kind's tests take them from there too)."""

from tests.inprocess_api import api, settings  # noqa: F401 - the fixtures
