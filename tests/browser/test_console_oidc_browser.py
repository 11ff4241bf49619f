"""The console's "Sign in with <provider>" button in headless chromium, through the local
OpenID Connect provider stub, against the real API under uvicorn."""

from __future__ import annotations

from playwright.async_api import async_playwright, expect

from tests.browser.test_console_browser import CHROMIUM, CHROMIUM_ARGS, SHOTS, TIMEOUT_MS
from tests.oidc_stub import oidc_provider
from waystation.settings import Settings
from waystation.testing import InProcessApi, free_port

SECRET = "oidc-browser-secret-0123456789-0123456789-ab"


async def test_the_sign_in_button_signs_in_through_the_provider(migrated_url):
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing; run scripts/install-system-packages"
    with oidc_provider("console") as provider:
        api = InProcessApi(Settings(
            database_url=migrated_url, jwt_secret=SECRET,
            temporal_address=f"127.0.0.1:{free_port()}", oidc_issuer=provider.issuer,
            oidc_client_id="console", oidc_user_claim="preferred_username",
            oidc_provider_name="Stub ID"))
        # The redirect URI the provider sends the browser back to is the API's own URL.
        api.settings = api.settings.model_copy(update={"console_url": api.url})
        await api.start()
        try:
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path=str(CHROMIUM),
                                                           args=CHROMIUM_ARGS)
                page = await browser.new_page()
                page.set_default_timeout(TIMEOUT_MS)
                await page.goto(api.url + "/")
                button = page.get_by_role("link", name="Sign in with Stub ID")
                await expect(button).to_be_visible()
                SHOTS.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(SHOTS / "sign_in_oidc.png"))
                await button.click()
                await expect(page.get_by_text("Signed in as ida")).to_be_visible()
                assert page.url in (api.url + "/", api.url + "/#/")
                cookies = {c["name"]: c for c in await page.context.cookies()}
                assert cookies["waystation_session"]["httpOnly"]
                await browser.close()
        finally:
            await api.stop()
