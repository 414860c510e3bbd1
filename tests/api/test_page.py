"""The web page at ``/`` (issue 7 item 4).

Fast checks with TestClient: the page and its static files carry the security headers, only
the page's own files are served, the HTML has no inline script or style and labels every
control, and the script never parses text as HTML.

The browser tests (marker ``browser``) start the real app with uvicorn on a free loopback port
over the committed demo bundle and demo indexes, and drive Debian's headless Chromium through
chromedriver (``make browser`` installs both): a German search with highlighted terms, an
explanation, pagination, the translator tab reached with the keyboard, a suggestion with its
diff marks, injected HTML shown as text, an API error in the alert region, a phone-width
layout, and the script's diff and snippet helpers on hand-computed examples. Screenshots go
to ``test-artifacts/``.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from service.api.app import create_app
from service.api.page import STATIC_FILES, WEB_DIR
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,1000",
]
XSS = "<img src=x onerror=alert(1)>"

# --- fast checks (TestClient, no resources loaded) -----------------------------------------


@pytest.fixture
def page_client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings.model_validate(
        {
            "model_bundles": [],
            "doc_indexes": [],
            "pool_indexes": [],
            "job_store": tmp_path / "jobs.sqlite3",
            "embedded_worker": False,
        }
    )
    with TestClient(create_app(settings)) as client:
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
        ("app.js", "text/javascript; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
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
    "path", ["/static/index.html", "/static/page.py", "/static/..%2Fpage.py", "/static/"]
)
def test_only_the_pages_own_files_are_served(page_client: TestClient, path: str) -> None:
    r = page_client.get(path)
    assert r.status_code == 404
    assert "def " not in r.text  # no Python source leaks


def test_unknown_static_file_names_the_served_ones(page_client: TestClient) -> None:
    r = page_client.get("/static/nope.js")
    assert r.status_code == 404
    assert r.json() == {
        "detail": "no static file 'nope.js'; the page's files are app.js, style.css, favicon.svg"
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
    assert scripts and all(a.get("src") for a in scripts)
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


def test_script_never_parses_text_as_html() -> None:
    source = (WEB_DIR / "app.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in source, sink
    assert "new Function" not in source


# --- the browser test ----------------------------------------------------------------------


class LiveServer:
    """The real app, served by uvicorn in a thread on a free loopback port."""

    def __init__(self, settings: Settings) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(create_app(settings), log_level="warning", ws="none", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the app did not start; see the log above")
            time.sleep(0.05)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    settings = Settings.model_validate(
        {
            "model_bundles": [ROOT / "models" / "demo-de-en"],
            "doc_indexes": [ROOT / "indexes" / "demo"],
            "pool_indexes": [ROOT / "indexes" / "demo-pool"],
            "job_store": tmp_path_factory.mktemp("jobs") / "jobs.sqlite3",
            "embedded_worker": False,
        }
    )
    with LiveServer(settings) as server:
        yield server


@pytest.fixture(scope="session")
def chrome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            pytest.fail(f"{path} is missing: run `make browser` (Debian chromium, chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(chrome: WebDriver, live_server: LiveServer) -> Iterator[WebDriver]:
    """The page loaded afresh, languages filled in; afterwards: no script error, no CSP hit."""
    chrome.set_window_size(1200, 1000)
    chrome.get(live_server.url + "/")
    wait(chrome).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#search-lang option"))
    yield chrome
    problems = [
        e["message"]
        for e in chrome.get_log("browser")
        if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]
    ]
    assert problems == []
    with pytest.raises(NoAlertPresentException):
        chrome.switch_to.alert.text  # noqa: B018 (an injected alert(1) would be open)


def wait(driver: WebDriver, seconds: float = 30) -> WebDriverWait[WebDriver]:
    return WebDriverWait(driver, seconds)


def screenshot(driver: WebDriver, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(ARTIFACTS / name))


def results(driver: WebDriver, list_id: str) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, f"#{list_id} > li")


def search(driver: WebDriver, query: str) -> None:
    box = driver.find_element(By.ID, "search-query")
    box.clear()
    box.send_keys(query, Keys.ENTER)  # Enter submits
    wait(driver).until(lambda d: d.find_element(By.ID, "search-summary").text.startswith("Res"))


def visible_words(driver: WebDriver, root: WebElement, tag: str) -> list[str]:
    """The words of the ``tag`` elements under ``root``, without their screen-reader text."""
    texts: list[str] = driver.execute_script(
        "return Array.from(arguments[0].querySelectorAll(arguments[1])).map(e =>"
        " Array.from(e.childNodes).filter(n => n.nodeType === 3).map(n => n.data).join(''))",
        root,
        tag,
    )
    return [w for t in texts for w in t.split()]


def marks_of(snippet: str) -> list[str]:
    return re.findall(r"<mark>(.*?)</mark>", snippet)


QUERY = "Wie füge ich eine Tabelle ein?"


@pytest.mark.browser
def test_search_with_highlights_explanation_and_pages(
    page: WebDriver, live_server: LiveServer
) -> None:
    assert page.find_element(By.ID, "service-status").text == "Languages loaded: German (de)."
    langs = page.find_elements(By.CSS_SELECTOR, "#search-lang option")
    assert [o.get_attribute("value") for o in langs] == ["de"]
    search(page, QUERY)
    api = live_server.post(
        "/v1/search", {"query": QUERY, "lang": "de", "method": "bowfd", "k": 10, "explain": True}
    )
    hits = results(page, "search-results")
    assert len(hits) == len(api["results"]) == 10
    assert page.find_element(By.ID, "search-summary").text == f"Results 1–10 for “{QUERY}”"
    titles = [h.find_element(By.CSS_SELECTOR, ".result-title").text for h in hits]
    assert titles == [r["title"] for r in api["results"]]
    # the snippet's matched English terms are highlighted, exactly those the API marked
    for hit, expected in zip(hits, api["results"], strict=True):
        marked = [m.text for m in hit.find_elements(By.CSS_SELECTOR, ".snippet mark")]
        assert marked == marks_of(expected["snippet"])
    assert any(marks_of(r["snippet"]) for r in api["results"])
    meta = dict(
        zip(
            [e.text for e in page.find_elements(By.CSS_SELECTOR, "#search-meta dt")],
            [e.text for e in page.find_elements(By.CSS_SELECTOR, "#search-meta dd")],
            strict=True,
        )
    )
    assert meta["Best translation of the query"] == api["translation"]
    assert meta["Weights version"] == api["weights_version"]
    assert meta["Timings"].startswith("decode ")
    # the explanation opens from the keyboard and shows the derivation's translation
    first = hits[0]
    toggle = first.find_element(By.CSS_SELECTOR, ".explain-toggle")
    panel = first.find_element(By.CSS_SELECTOR, ".explanation")
    assert toggle.get_attribute("aria-expanded") == "false" and not panel.is_displayed()
    toggle.send_keys(Keys.ENTER)
    assert toggle.get_attribute("aria-expanded") == "true" and panel.is_displayed()
    [sentence] = api["results"][0]["explanation"]["sentences"]
    translation = panel.find_element(By.CSS_SELECTOR, ".translation")
    assert translation.text == sentence["translation"]
    matched = {m["term"] for m in sentence["matched"]}
    marked = {m.text for m in translation.find_elements(By.CSS_SELECTOR, "mark")}
    assert marked == {w for w in sentence["translation"].split() if w in matched} != set()
    screenshot(page, "web-search.png")
    # pagination by offset
    page.find_element(By.ID, "search-next").send_keys(Keys.ENTER)
    wait(page).until(lambda d: "11–" in d.find_element(By.ID, "search-summary").text)
    assert page.find_element(By.ID, "search-results").get_attribute("start") == "11"
    second = live_server.post("/v1/search", {"query": QUERY, "lang": "de", "k": 10, "offset": 10})
    titles = [
        h.find_element(By.CSS_SELECTOR, ".result-title").text
        for h in results(page, "search-results")
    ]
    assert titles == [r["title"] for r in second["results"]]
    page.find_element(By.ID, "search-prev").send_keys(Keys.ENTER)
    wait(page).until(
        lambda d: d.find_element(By.ID, "search-summary").text.startswith("Results 1–")
    )
    assert page.find_element(By.ID, "search-prev").get_attribute("disabled") == "true"


@pytest.mark.browser
def test_translator_tab_by_keyboard_with_diff_marks(
    page: WebDriver, live_server: LiveServer
) -> None:
    search_tab = page.find_element(By.ID, "tab-search")
    translate_tab = page.find_element(By.ID, "tab-translate")
    search_tab.send_keys(Keys.ARROW_RIGHT)
    assert translate_tab.get_attribute("aria-selected") == "true"
    assert search_tab.get_attribute("aria-selected") == "false"
    assert page.switch_to.active_element == translate_tab
    assert page.find_element(By.ID, "panel-translate").is_displayed()
    assert not page.find_element(By.ID, "panel-search").is_displayed()
    translate_tab.send_keys(Keys.ARROW_RIGHT)  # wraps around
    assert search_tab.get_attribute("aria-selected") == "true"
    search_tab.send_keys(Keys.END)
    assert page.switch_to.active_element == translate_tab

    sentence = "Wählen Sie eine Tabelle aus."
    page.find_element(By.ID, "suggest-sentence").send_keys(sentence, Keys.ENTER)
    wait(page).until(lambda d: results(d, "suggest-results"))
    api = live_server.post("/v1/suggest", {"sentence": sentence, "lang": "de", "nbest": 5, "k": 10})
    items = results(page, "suggest-results")
    assert [i.find_element(By.CSS_SELECTOR, ".reference").text for i in items] == [
        r["text"] for r in api["results"]
    ]
    nbest = [e.text for e in page.find_elements(By.CSS_SELECTOR, ".nbest li > span:first-child")]
    assert nbest == [t["text"] for t in api["translations"]]
    # every reference is diffed against the 1-best translation; its words are all shown
    best = api["translations"][0]["text"]
    for item, expected in zip(items, api["results"], strict=True):
        diff = item.find_element(By.CSS_SELECTOR, ".diff")
        ops = page.execute_script(
            "return ClirPage.wordDiff(arguments[0], arguments[1])", best, expected["text"]
        )
        inserted = [o["token"]["text"] for o in ops if o["op"] == "ins"]
        deleted = [o["token"]["text"] for o in ops if o["op"] == "del"]
        assert visible_words(page, diff, "ins") == inserted
        assert visible_words(page, diff, "del") == deleted
    assert page.find_elements(By.CSS_SELECTOR, "#suggest-results ins.diff-ins")
    # the changes are announced in text to screen readers
    hidden = page.find_elements(By.CSS_SELECTOR, "#suggest-results ins .sr-only")
    assert hidden and hidden[0].get_attribute("textContent") == "[added: "
    assert (
        items[0]
        .find_element(By.CSS_SELECTOR, ".diff-summary")
        .text.endswith("compared with the translation.")
    )
    screenshot(page, "web-translator.png")


@pytest.mark.browser
def test_injected_html_is_shown_as_text(page: WebDriver) -> None:
    search(page, f"{XSS} Tabelle")
    summary = page.find_element(By.ID, "search-summary").text
    assert summary.startswith("Results 1–") and XSS in summary
    assert page.find_elements(By.TAG_NAME, "img") == []
    page.find_element(By.ID, "tab-search").send_keys(Keys.ARROW_RIGHT)
    page.find_element(By.ID, "suggest-sentence").send_keys(f"<b>fett</b>{XSS} Tabelle", Keys.ENTER)
    wait(page).until(lambda d: "“" in d.find_element(By.ID, "suggest-summary").text)
    assert f"<b>fett</b>{XSS} Tabelle" in page.find_element(By.ID, "suggest-summary").text
    assert page.find_elements(By.CSS_SELECTOR, "main img, main b") == []


@pytest.mark.browser
def test_api_errors_are_shown_in_the_alert_region(page: WebDriver) -> None:
    alert = page.find_element(By.ID, "alert")
    assert not alert.is_displayed()
    k = page.find_element(By.ID, "search-k")
    k.clear()
    k.send_keys("5000")
    page.find_element(By.ID, "search-query").send_keys(QUERY, Keys.ENTER)
    wait(page).until(lambda d: d.find_element(By.ID, "alert").is_displayed())
    assert alert.get_attribute("role") == "alert"
    assert alert.text == "Error 422: k: Input should be less than or equal to 1000"
    # the next good search clears it
    k.clear()
    k.send_keys("3")
    page.find_element(By.ID, "search-query").send_keys(Keys.ENTER)
    wait(page).until(lambda d: len(results(d, "search-results")) == 3)
    assert not alert.is_displayed()


@pytest.mark.browser
def test_phone_width_has_no_horizontal_scrolling(page: WebDriver) -> None:
    page.set_window_size(375, 812)
    search(page, QUERY)
    page.find_element(By.CSS_SELECTOR, ".explain-toggle").send_keys(Keys.ENTER)
    inner, scroll = page.execute_script(
        "return [window.innerWidth, document.documentElement.scrollWidth]"
    )
    assert inner <= 375 and scroll <= inner
    screenshot(page, "web-phone.png")


DIFF_CASES = [
    (
        "select a table .",
        "Select a language.",
        [("same", "Select"), ("same", "a"), ("del", "table"), ("ins", "language"), ("same", ".")],
    ),
    ("a b c", "a b c", [("same", "a"), ("same", "b"), ("same", "c")]),
    ("", "new words", [("ins", "new"), ("ins", "words")]),
    ("a b c", "a c", [("same", "a"), ("del", "b"), ("same", "c")]),
    (
        "the house is big",
        "the big house",
        [("same", "the"), ("del", "house"), ("del", "is"), ("same", "big"), ("ins", "house")],
    ),
]


@pytest.mark.browser
@pytest.mark.parametrize(("before", "after", "expected"), DIFF_CASES)
def test_word_diff_by_hand(
    page: WebDriver, before: str, after: str, expected: list[tuple[str, str]]
) -> None:
    ops = page.execute_script("return ClirPage.wordDiff(arguments[0], arguments[1])", before, after)
    assert [(o["op"], o["token"]["text"]) for o in ops] == expected


@pytest.mark.browser
def test_diff_runs_keep_spacing(page: WebDriver) -> None:
    runs = page.execute_script(
        "return ClirPage.diffRuns(ClirPage.wordDiff(arguments[0], arguments[1]))",
        "the house is big.",
        "the big house.",
    )
    assert [(r["op"], r["lead"], r["text"]) for r in runs] == [
        ("same", "", "the"),
        ("del", " ", "house is"),
        ("same", " ", "big"),
        ("ins", " ", "house"),
        ("same", "", "."),
    ]


@pytest.mark.browser
@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("a b", "a b", "Same words as the translation."),
        ("a b", "a c d", "2 words added, 1 word removed compared with the translation."),
        ("click the ok button .", "Click OK.", "2 words removed compared with the translation."),
    ],
)
def test_diff_summary_by_hand(page: WebDriver, before: str, after: str, expected: str) -> None:
    text = page.execute_script(
        "return ClirPage.diffSummary(ClirPage.wordDiff(arguments[0], arguments[1]))", before, after
    )
    assert text == expected


@pytest.mark.browser
def test_snippet_parsing_by_hand(page: WebDriver) -> None:
    snippet = "a <mark>b</mark> &lt;img src=x onerror=alert(1)&gt; &amp;lt; &#x27;q&#x27; &#8230;"
    parts = page.execute_script("return ClirPage.parseSnippet(arguments[0])", snippet)
    assert [(p["text"], p["mark"]) for p in parts] == [
        ("a ", False),
        ("b", True),
        (" <img src=x onerror=alert(1)> &lt; 'q' …", False),
    ]
