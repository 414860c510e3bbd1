"""The OpenAPI pages (``/docs``, ``/redoc``) work on a host without internet: Swagger UI and: the
tests that start processes, Ray or a browser, read the shared data or run long (the integration
tier, tests/README.md); the rest are in :mod:`tests.api.test_docs_page`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.api.browser import LiveServer, leaving, requested_urls
from tests.api.test_docs_page import (
    OPERATIONS,
    REDOC_LOGO,
    _settings,
)


@pytest.mark.browser
def test_swagger_ui_renders_the_operations_offline(
    chrome: WebDriver, docs_server: LiveServer
) -> None:
    requested_urls(chrome)  # forget earlier pages
    chrome.get(docs_server.url + "/docs")
    WebDriverWait(chrome, 30).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock .opblock-summary-path")
    )
    paths = {
        e.get_attribute("data-path")
        for e in chrome.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")
    }
    assert set(OPERATIONS) <= paths
    urls = requested_urls(chrome)
    assert any(u.endswith("/openapi.json") for u in urls)
    assert leaving(urls) == []


@pytest.mark.browser
def test_redoc_renders_the_operations_offline(chrome: WebDriver, docs_server: LiveServer) -> None:
    requested_urls(chrome)
    chrome.get(docs_server.url + "/redoc")
    WebDriverWait(chrome, 30).until(
        lambda d: "/v1/search" in d.find_element(By.TAG_NAME, "body").text
    )
    text = chrome.find_element(By.TAG_NAME, "body").text
    assert all(op in text for op in ("/v1/search", "/v1/translate", "/v1/suggest"))
    # ReDoc's bundle always asks for its maker's logo in the menu's footer, and hides the
    # image when it does not load: the one request that may leave, and nothing needs it
    assert set(leaving(requested_urls(chrome))) <= {REDOC_LOGO}


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(_settings(tmp_path_factory.mktemp("docs"))) as server:
        yield server
