"""The one Chromium of a session's browser tests (tests/api/browser.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.api.browser import OFFLINE, headless_chromium


@pytest.fixture(scope="session")
def chrome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """Headless Chromium for every browser test, started by the first that asks: offline, with
    its console (``browser``) and network (``performance``) logs. Every browser test runs in one
    xdist worker (tests/conftest.py), so the session starts it once."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    with headless_chromium(profile, ("performance", "browser"), [OFFLINE]) as driver:
        yield driver
