"""Models of the console's own routes (api/routes/console.py): who is signed in, and how
this installation signs browsers in."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class KindPageView(BaseModel):
    kind: str
    name: str
    title: str


class RunFilterView(BaseModel):
    """A kind's own filter of the runs list (`ApiHooks.run_filters`), a field of the runs page:
    `GET /runs?<name>=`."""

    name: str
    label: str
    pattern: str | None
    placeholder: str


class ConsoleSessionView(BaseModel):
    """Who the console is signed in as, and what its pages need to know."""

    user: str
    role: Literal["user", "service"]
    csrf_token: str | None
    temporal_ui_url: str
    temporal_namespace: str
    kinds: list[str]
    # The kinds with a console section of their own (`ConsoleHooks.module`), loaded by a
    # run's page from /console/static/kinds/<kind>.js.
    kind_sections: list[str] = []
    # The kinds' own pages (`ConsoleHooks.pages`), linked in the navigation as #/<name>.
    kind_pages: list[KindPageView] = []
    # The kinds' own filters of the runs list (`ApiHooks.run_filters`), fields of its page.
    run_filters: list[RunFilterView] = []


class ConsoleConfig(BaseModel):
    """How this installation signs browsers in (read before anyone is signed in)."""

    oidc_provider: str | None
    oidc_logout_url: str | None = Field(
        None, description="Where signing out sends the browser to sign out at the identity "
                          "provider too (when it offers RP-initiated logout).")
