"""The OpenAPI pages (``/docs``, ``/redoc``) work on a host without internet: Swagger UI and: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.api.test_docs_page`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.api.browser import LiveServer, headless_chromium
from tests.api.test_docs_page import (
    OFFLINE,
    OPERATIONS,
    REDOC_LOGO,
    _leaving,
    _requested_urls,
    _settings,
)


@pytest.mark.browser
def test_swagger_ui_renders_the_operations_offline(
    offline_chrome: WebDriver, docs_server: LiveServer
) -> None:
    _requested_urls(offline_chrome)  # forget earlier pages
    offline_chrome.get(docs_server.url + "/docs")
    WebDriverWait(offline_chrome, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock .opblock-summary-path")
    )
    paths = {
        e.get_attribute("data-path")
        for e in offline_chrome.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
    }
    assert set(OPERATIONS) <= paths
    urls = _requested_urls(offline_chrome)
    assert any(u.endswith("/openapi.json") for u in urls)
    assert _leaving(urls) == []


@pytest.mark.browser
def test_redoc_renders_the_operations_offline(
    offline_chrome: WebDriver, docs_server: LiveServer
) -> None:
    _requested_urls(offline_chrome)
    offline_chrome.get(docs_server.url + "/redoc")
    WebDriverWait(offline_chrome, 30).until(
        lambda d: "/v1/search" in d.find_element(By.TAG_NAME, "body").text
    )
    text = offline_chrome.find_element(By.TAG_NAME, "body").text
    assert all(op in text for op in ("/v1/search", "/v1/translate", "/v1/suggest"))
    # ReDoc's bundle always asks for its maker's logo in the menu's footer, and hides the
    # image when it does not load: the one request that may leave, and nothing needs it
    assert set(_leaving(_requested_urls(offline_chrome))) <= {REDOC_LOGO}


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(_settings(tmp_path_factory.mktemp("docs"))) as server:
        yield server


@pytest.fixture(scope="module")
def offline_chrome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    profile = tmp_path_factory.mktemp("chromium-docs-profile")
    with headless_chromium(profile, ("performance", "browser"), [OFFLINE]) as driver:
        yield driver
