"""WAYSTATION_SLACK_LINK_BY: linking by e-mail is refused at start unless Waystation's users are
named by the identity provider's verified e-mail, where a Slack address names nobody else."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from waystation.settings import Settings

OIDC = {"oidc_issuer": "https://idp.example.com", "oidc_client_id": "waystation"}


@pytest.mark.parametrize("way", ["email", "both"])
def test_linking_by_email_needs_users_named_by_the_providers_verified_email(way: str):
    for named_otherwise in ({}, OIDC, OIDC | {"oidc_user_claim": "preferred_username"}):
        with pytest.raises(ValidationError, match="WAYSTATION_OIDC_USER_CLAIM=email"):
            Settings(slack_link_by=way, **named_otherwise)
    assert Settings(slack_link_by=way, oidc_user_claim="email", **OIDC).slack_link_by == way


def test_the_command_is_the_default_and_needs_nothing_more():
    assert Settings().slack_link_by == "command"
    with pytest.raises(ValidationError):
        Settings(slack_link_by="mail")
