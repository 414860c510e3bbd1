"""The web page at ``/``, checked without a browser (TestClient): the page and its static files
carry the security headers, only the page's own files are served (its script is
``js/main.js`` and the ES modules it imports, each served, and nothing else), the HTML has no
inline script or style and labels every control, the query inputs have a maxlength,
``/readyz`` tells the page the server's maximum, and no module parses text as HTML. The page
in a real browser: :mod:`tests.api.integration.test_page`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.api.page import JS_MODULES, STATIC_FILES, WEB_DIR
from tests.api.conftest import bare_settings

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
XSS = "<img src=x onerror=alert(1)>"
MAX_QUERY_CHARS = 1500  # the live server's max_query_chars (the page's default is 2000)

# --- fast checks (TestClient, no resources loaded) -----------------------------------------


@pytest.fixture
def page_client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(bare_settings(tmp_path))) as client:
        yield client


def assert_security_headers(headers: Any) -> None:
    csp = {d.strip() for d in headers["content-security-policy"].split(";")}
    for directive in (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ):
        assert directive in csp
    assert "unsafe-inline" not in headers["content-security-policy"]
    assert "unsafe-eval" not in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-frame-options"] == "DENY"


def test_page_has_security_headers(page_client: TestClient) -> None:
    r = page_client.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert_security_headers(r.headers)
    assert "<title>" in r.text


@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("style.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
        *[(f"js/{module}", "text/javascript; charset=utf-8") for module in JS_MODULES],
    ],
)
def test_static_files_have_security_headers(
    page_client: TestClient, name: str, media_type: str
) -> None:
    r = page_client.get(f"/static/{name}")
    assert r.status_code == 200
    assert r.headers["content-type"] == media_type
    assert r.content == (WEB_DIR / name).read_bytes()
    assert_security_headers(r.headers)
    head = page_client.head(f"/static/{name}")
    assert head.status_code == 200 and head.content == b""


@pytest.mark.parametrize(
    "path",
    [
        "/static/index.html",
        "/static/page.py",
        "/static/..%2Fpage.py",
        "/static/",
        "/static/js/",
        "/static/js/..%2F..%2Fpage.py",
        "/static/js/nope.js",
        "/static/web/js/main.js",
    ],
)
def test_only_the_pages_own_files_are_served(page_client: TestClient, path: str) -> None:
    r = page_client.get(path)
    assert r.status_code == 404
    assert "def " not in r.text  # no Python source leaks


def test_unknown_static_file_names_the_served_ones(page_client: TestClient) -> None:
    r = page_client.get("/static/nope.js")
    assert r.status_code == 404
    assert r.json() == {
        "detail": "no static file 'nope.js'; the page's files are style.css, favicon.svg, "
        "js/main.js, js/api.js, js/diff.js, js/docview.js, js/dom.js, js/explanation.js, "
        "js/languages.js, js/search.js, js/tabs.js, js/text.js, js/translator.js"
    }
    assert_security_headers(r.headers)


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.open: list[str] = []
        self.script_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.open and self.open[-1] == tag:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        if self.open and self.open[-1] == "script" and data.strip():
            self.script_text.append(data)


def parse_page() -> _PageParser:
    parser = _PageParser()
    parser.feed((WEB_DIR / "index.html").read_text(encoding="utf-8"))
    return parser


def test_page_has_no_inline_script_or_style_and_no_external_resources() -> None:
    page = parse_page()
    assert page.script_text == []
    scripts = [a for tag, a in page.tags if tag == "script"]
    assert scripts == [{"type": "module", "src": "/static/js/main.js"}]  # it imports the rest
    assert not any(tag == "style" for tag, _ in page.tags)
    for tag, attrs in page.tags:
        assert "style" not in attrs, tag
        assert not [k for k in attrs if k.startswith("on")], tag
        for key in ("src", "href"):
            url = attrs.get(key)
            if url is not None:
                assert url.startswith(("/", "#")) and not url.startswith("//"), url
                if url.startswith("/static/"):
                    assert url.removeprefix("/static/") in STATIC_FILES


def test_every_control_has_a_label_and_tabs_form_a_tablist() -> None:
    page = parse_page()
    labelled = {a.get("for") for tag, a in page.tags if tag == "label"}
    controls = [a for tag, a in page.tags if tag in ("input", "select", "textarea")]
    assert controls
    for attrs in controls:
        assert attrs.get("id") in labelled, attrs
    tabs = [a for _, a in page.tags if a.get("role") == "tab"]
    panels = {a.get("id"): a for _, a in page.tags if a.get("role") == "tabpanel"}
    assert len(tabs) == 2 and len(panels) == 2
    assert [t.get("aria-selected") for t in tabs] == ["true", "false"]
    assert [t.get("tabindex") for t in tabs] == ["0", "-1"]
    for tab in tabs:
        assert panels[tab["aria-controls"]]["aria-labelledby"] == tab["id"]


def test_query_inputs_have_the_default_maxlength() -> None:
    inputs = {a.get("id"): a for tag, a in parse_page().tags if tag == "input"}
    for name in ("search-query", "suggest-sentence"):
        assert inputs[name].get("maxlength") == "2000", name


def test_readyz_tells_the_page_the_maximum_query_length(tmp_path: Path) -> None:
    with TestClient(create_app(bare_settings(tmp_path, max_query_chars=123))) as client:
        r = client.get("/readyz")
        assert r.status_code == 503
        assert r.json()["max_query_chars"] == 123


IMPORT = re.compile(r'^import\s*(?:\{[^}]*\}\s*from\s*)?"([^"]+)";', re.MULTILINE)


def module_imports(name: str) -> list[str]:
    """What the module ``js/<name>`` imports, as written (``./other.js``)."""
    return IMPORT.findall((WEB_DIR / "js" / name).read_text(encoding="utf-8"))


def test_the_served_modules_are_main_and_what_it_imports() -> None:
    """Every module main.js reaches is served and is a file of js/, and every file of js/ is
    reached: a new module cannot be forgotten in STATIC_FILES, nor a stale one served."""
    reached: set[str] = set()
    todo = ["main.js"]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        for spec in module_imports(name):
            assert re.fullmatch(r"\./[a-z]+\.js", spec), f"{name} imports {spec}"
            todo.append(spec.removeprefix("./"))
    on_disk = {p.name for p in (WEB_DIR / "js").iterdir()}
    assert reached == set(JS_MODULES) == on_disk
    assert JS_MODULES[0] == "main.js"


@pytest.mark.parametrize("name", sorted(p.name for p in (WEB_DIR / "js").glob("*.js")))
def test_script_never_parses_text_as_html(name: str) -> None:
    source = (WEB_DIR / "js" / name).read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in source, sink
    assert "new Function" not in source
    assert "import(" not in source  # no module loaded at run time, past the list above
