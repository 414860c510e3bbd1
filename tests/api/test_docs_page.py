"""The OpenAPI pages (``/docs``, ``/redoc``) work on a host without internet: Swagger UI and
ReDoc come from files the app serves, not from a CDN.

The fast test reads the pages' HTML with TestClient: every script, style sheet and icon it
names is a local path that the app serves. The browser test (marker ``browser``) serves the
app with uvicorn on a loopback port and opens ``/docs`` and ``/redoc`` in Debian's headless
Chromium, which resolves no host name but 127.0.0.1 (an offline host): the operations must
render, and Chromium's network log must show no request to any other host (ReDoc: none but
its decorative logo, which it hides when it cannot load).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.core.settings import Settings
from tests.api.conftest import bare_settings

# an offline host: every name but the loopback address fails to resolve
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
OPERATIONS = ["/v1/search", "/v1/translate", "/v1/suggest", "/healthz", "/metrics"]


def _settings(tmp: Path) -> Settings:
    """No models or indexes: the docs pages need only the OpenAPI document."""
    return bare_settings(tmp, warm_up=False)


class _Assets(HTMLParser):
    """Every URL a page loads: ``src``/``href`` attributes and the spec URL in its script."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "spec-url") and value:
                self.urls.append(value)

    def handle_data(self, data: str) -> None:
        self.urls += re.findall(r"""\burl:\s*['"]([^'"]+)['"]""", data)
        self.urls += re.findall(r"""https?://[^\s'"<>]+""", data)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_reference_only_local_assets(tmp_path: Path, page: str) -> None:
    with TestClient(create_app(_settings(tmp_path))) as client:
        r = client.get(page)
        assert r.status_code == 200
        parser = _Assets()
        parser.feed(r.text)
        scripts = [u for u in parser.urls if u.endswith(".js")]
        assert scripts, parser.urls  # the page does load its UI from somewhere
        for url in parser.urls:
            parts = urlsplit(url)
            assert not parts.scheme and not parts.netloc, f"{page} loads {url} from elsewhere"
            asset = client.get(url)
            assert asset.status_code == 200 and asset.content, url
