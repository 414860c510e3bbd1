"""The web page at ``/`` in a real browser (marker ``browser``): the real app started with
uvicorn on a free loopback port over the committed demo bundle and demo indexes, driven by
Debian's headless Chromium through chromedriver (``make browser`` installs both; one browser
and one server for the session, :mod:`tests.api.integration.conftest`): a German search with
highlighted terms, an explanation, pagination, the translator tab reached with the keyboard, a
suggestion with its diff marks, injected HTML shown as text, an API error in the alert region,
a phone-width layout, and the script's diff and snippet helpers on hand-computed examples
(through ``window.ClirPage``, the test hook ``js/main.js`` exposes). And, as a searcher
expects: result titles link to a document view (``#doc=<id>``; full text with the server's
highlights, the translation that found it, back without searching again, a direct link, a 404
message), errors clear stale results, scores and the scorer signature behind "Details", the
controls readable at 360, 768 and 1280 px, long queries cut short in the heading, the inputs
limited to the server's ``max_query_chars``. Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.api.browser import LiveServer, leaving, requested_urls
from tests.api.conftest import demo_settings

ROOT = Path(__file__).resolve().parents[3]
ARTIFACTS = ROOT / "test-artifacts"
XSS = "<img src=x onerror=alert(1)>"
MAX_QUERY_CHARS = 1500  # the live server's max_query_chars (the page's default is 2000)


# --- the browser test ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The demo service with feedback and the dense reader off by default: the page's tests
    read each method's own results, and the switches turn them on (the shipped defaults, on,
    have their own tests)."""
    settings = demo_settings(
        tmp_path_factory.mktemp("jobs"), max_query_chars=MAX_QUERY_CHARS, feedback=False,
        dense=False,
    )  # fmt: skip
    with LiveServer(settings) as server:
        yield server


@pytest.fixture
def page(chrome: WebDriver, live_server: LiveServer) -> Iterator[WebDriver]:
    """The page loaded afresh, languages filled in; afterwards: no script error, no CSP hit and
    no request that left this host (the browser is offline: tests/api/browser.py)."""
    chrome.set_window_size(1200, 1000)
    requested_urls(chrome)  # forget earlier pages
    chrome.get(live_server.url + "/")
    wait(chrome).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#search-lang option"))
    yield chrome
    assert leaving(requested_urls(chrome)) == []
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


def count_text(api: dict[str, Any]) -> str:
    """How the summary line shows a search response's total: "37", "up to 630" (a lower
    bound with an upper one), or "10+" (a lower bound)."""
    if api["total_relation"] != "gte":
        return str(api["total"])
    return f"up to {api['total_max']}" if api.get("total_max") is not None else f"{api['total']}+"


def marks_of(snippet: str) -> list[str]:
    return re.findall(r"<mark>(.*?)</mark>", snippet)


def search_meta(driver: WebDriver) -> dict[str, str]:
    return dict(
        zip(
            [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#search-meta dt")],
            [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#search-meta dd")],
            strict=True,
        )
    )


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
    summary = page.find_element(By.ID, "search-summary").text
    assert summary == f"Results 1–10 of {count_text(api)} for “{QUERY}”"
    titles = [h.find_element(By.CSS_SELECTOR, ".result-title").text for h in hits]
    assert titles == [r["title"] for r in api["results"]]
    # each says which manual it comes from (what tells same-titled pages apart)
    origins = [h.find_element(By.CSS_SELECTOR, ".doc-origin").text for h in hits]
    assert origins == [r["origin"] for r in api["results"]]
    assert all(o.startswith("LibreOffice") for o in origins)
    # the snippet's matched English terms are highlighted, exactly those the API marked
    for hit, expected in zip(hits, api["results"], strict=True):
        marked = [m.text for m in hit.find_elements(By.CSS_SELECTOR, ".snippet mark")]
        assert marked == marks_of(expected["snippet"])
    assert any(marks_of(r["snippet"]) for r in api["results"])
    translation = page.find_element(By.CSS_SELECTOR, "#search-translation .translation")
    assert translation.text == api["translation"]
    page.find_element(By.CSS_SELECTOR, "#search-details > summary").click()
    meta = search_meta(page)
    assert meta["Scorer"] == api["signature"]
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
    marked_words = {m.text for m in translation.find_elements(By.CSS_SELECTOR, "mark")}
    assert marked_words == {w for w in sentence["translation"].split() if w in matched} != set()
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
    api = live_server.post("/v1/suggest", {"query": sentence, "lang": "de", "nbest": 5, "k": 10})
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
        # tokens that touch in the text ("text" ",") touch on the page: compare the characters
        assert "".join(visible_words(page, diff, "ins")) == "".join(inserted)
        assert "".join(visible_words(page, diff, "del")) == "".join(deleted)
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
    # in the page's words: the field's label, not the API's name for it
    assert alert.text == "Error 422: Per page: should be at most 1000"
    # the next good search clears it
    k.clear()
    k.send_keys("3")
    page.find_element(By.ID, "search-query").send_keys(Keys.ENTER)
    wait(page).until(lambda d: len(results(d, "search-results")) == 3)
    assert not alert.is_displayed()


BUSY_ONCE = """
const real = window.fetch.bind(window);
window.busyCalls = [];
window.fetch = function (path, init) {
  window.busyCalls.push(String(path));
  if (String(path).endsWith("/v1/search") && window.busyCalls.length === 1) {
    return Promise.resolve(new Response(JSON.stringify({detail: "the service is busy: the \
queue is full; retry after 1 s"}), {status: 429, headers: {"Retry-After": "1"}}));
  }
  return real(path, init);
};
"""


@pytest.mark.browser
def test_a_busy_service_is_asked_again_after_the_wait_it_names(page: WebDriver) -> None:
    # the service's 429 (or 503) with Retry-After, as admission answers under load: the page
    # says it is busy, waits, and searches again, instead of leaving the searcher an error
    page.execute_script(BUSY_ONCE)  # the first search answers busy (the rest: the service)
    page.find_element(By.ID, "search-query").send_keys(QUERY, Keys.ENTER)
    wait(page).until(lambda d: "busy" in d.find_element(By.ID, "search-summary").text)
    assert page.find_element(By.ID, "search-summary").text == (
        "The service is busy: trying again in 1 s…"
    )
    wait(page).until(lambda d: d.find_element(By.ID, "search-summary").text.startswith("Res"))
    assert not page.find_element(By.ID, "alert").is_displayed()
    assert page.execute_script("return window.busyCalls.length") == 2


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


# --- the page as a searcher expects ------------------------------------------------------------


def explanation_terms(explanation: dict[str, Any]) -> list[str]:
    """The matched terms of an explanation, each once (what the page puts in a #doc= link)."""
    if explanation.get("feedback") and "matched" in explanation:  # {term, weight}, own first
        own = explanation_terms(explanation["first"]) if explanation["first"] else []
        terms = [*own, *(str(m["term"]) for m in explanation["matched"])]
    elif "matched" in explanation:
        terms = [str(t) for t in explanation["matched"]]
    elif "sentences" in explanation:
        terms = [str(m["term"]) for s in explanation["sentences"] for m in s["matched"]]
    else:
        terms = [e for found in explanation["terms"].values() for e in found]
    return list(dict.fromkeys(terms))


def doc_target(link: WebElement) -> tuple[str, list[str]]:
    """The document id and terms of a result link's ``#doc=…&term=…`` href."""
    href = link.get_attribute("href") or ""
    fragment = urllib.parse.urlsplit(href).fragment
    params = urllib.parse.parse_qs(fragment, keep_blank_values=True)
    return params["doc"][0], params.get("term", [])


def open_first_document(driver: WebDriver) -> WebElement:
    """Click the first result's title; wait for the document view. Returns the result."""
    first = results(driver, "search-results")[0]
    first.find_element(By.CSS_SELECTOR, ".result-title a").click()
    wait(driver).until(lambda d: d.find_element(By.ID, "doc-article").is_displayed())
    return first


def shown_paragraphs(driver: WebDriver) -> list[str]:
    return [p.text for p in driver.find_elements(By.CSS_SELECTOR, "#doc-text > p")]


def check_document_view(
    driver: WebDriver, live_server: LiveServer, doc_id: str, terms: list[str]
) -> dict[str, Any]:
    """The view shows the document's title, id, source, paragraphs and the server's highlights."""
    api: dict[str, Any] = live_server.get(
        f"/v1/documents/{urllib.parse.quote(doc_id)}", terms=terms
    )
    assert driver.find_element(By.ID, "doc-title").text == api["title"]
    meta = dict(
        zip(
            [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#doc-meta dt")],
            [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#doc-meta dd")],
            strict=True,
        )
    )
    assert meta == {"Id": doc_id, "Source": api["source"]}
    lines = [" ".join(line.split()) for line in api["text"].split("\n")]
    assert shown_paragraphs(driver) == [line for line in lines if line]
    marked = [m.text for m in driver.find_elements(By.CSS_SELECTOR, "#doc-text mark")]
    assert marked == [api["text"][s:e] for s, e in api["highlights"]]
    title_marks = [m.text for m in driver.find_elements(By.CSS_SELECTOR, "#doc-title mark")]
    assert title_marks == [api["title"][s:e] for s, e in api["title_highlights"]]
    return api


@pytest.mark.browser
def test_a_result_opens_its_document_and_back_returns_to_the_results(
    page: WebDriver, live_server: LiveServer
) -> None:
    search(page, QUERY)
    api = live_server.post(
        "/v1/search", {"query": QUERY, "lang": "de", "method": "bowfd", "k": 10, "explain": True}
    )
    hits = results(page, "search-results")
    # every title is a real link to the in-page document view, carrying the matched terms
    links = [h.find_element(By.CSS_SELECTOR, ".result-title a") for h in hits]
    assert [doc_target(a) for a in links] == [
        (r["id"], explanation_terms(r["explanation"])) for r in api["results"]
    ]
    summary = page.find_element(By.ID, "search-summary").text
    first = open_first_document(page)
    hit = api["results"][0]
    assert page.execute_script("return location.hash").startswith("#doc=")
    assert not page.find_element(By.ID, "panel-search").is_displayed()
    view = check_document_view(page, live_server, hit["id"], explanation_terms(hit["explanation"]))
    assert view["highlights"]  # the matched terms are in the text
    # the translation that found it: BOW-FD's best derivation, its matched words marked
    [sentence] = hit["explanation"]["sentences"]
    found = page.find_element(By.ID, "doc-found-by")
    shown = found.find_element(By.CSS_SELECTOR, ".found-body .translation")
    assert shown.text == sentence["translation"]
    marked = {m.text for m in shown.find_elements(By.TAG_NAME, "mark")}
    assert marked == {m["term"] for m in sentence["matched"]} & set(sentence["translation"].split())
    assert page.title.startswith(view["title"])
    screenshot(page, "web-document.png")
    # the browser's back button shows the same results again: no new search replaced them
    page.back()
    wait(page).until(lambda d: d.find_element(By.ID, "panel-search").is_displayed())
    assert first.is_displayed()  # the same element (a new search would have made it stale)
    assert page.find_element(By.ID, "search-summary").text == summary
    assert not page.find_element(By.ID, "doc-view").is_displayed()
    # and so does the page's own back link
    open_first_document(page)
    page.find_element(By.ID, "doc-back").click()
    wait(page).until(lambda d: d.find_element(By.ID, "panel-search").is_displayed())
    assert first.is_displayed()
    assert page.execute_script("return location.hash") == ""


@pytest.mark.browser
@pytest.mark.parametrize("method", ["dt", "psq"])
def test_the_document_view_shows_the_translation_of_dt_and_psq(
    page: WebDriver, live_server: LiveServer, method: str
) -> None:
    Select(page.find_element(By.ID, "search-method")).select_by_value(method)
    search(page, QUERY)
    api = live_server.post(
        "/v1/search", {"query": QUERY, "lang": "de", "method": method, "k": 10, "explain": True}
    )
    hit = api["results"][0]
    open_first_document(page)
    check_document_view(page, live_server, hit["id"], explanation_terms(hit["explanation"]))
    found = page.find_element(By.ID, "doc-found-by")
    explanation = hit["explanation"]
    if method == "dt":  # the query's 1-best translation
        assert (
            found.find_element(By.CSS_SELECTOR, ".found-body .translation").text
            == (explanation["translation"])
        )
    else:  # PSQ: each query word with its translations found in the document
        items = [li.text for li in found.find_elements(By.CSS_SELECTOR, ".found-body li")]
        assert items == [
            f"{src} → {', '.join(found)}" for src, found in explanation["terms"].items()
        ]
        assert items


@pytest.mark.browser
@pytest.mark.parametrize(("method", "relation"), [("dt", "eq"), ("bowfd", "gte")])
def test_the_summary_says_how_many_documents_were_retrieved(
    page: WebDriver, live_server: LiveServer, method: str, relation: str
) -> None:
    """DT knows its count ("of 37"); BOW-FD, which stops scoring once the page is certain,
    knows that at least 10 and at most its candidates were retrieved ("of up to 630")."""
    Select(page.find_element(By.ID, "search-method")).select_by_value(method)
    search(page, QUERY)
    api = live_server.post("/v1/search", {"query": QUERY, "lang": "de", "method": method})
    assert api["total_relation"] == relation and api["total"] >= 10
    summary = page.find_element(By.ID, "search-summary").text
    assert summary == f"Results 1–10 of {count_text(api)} for “{QUERY}”"
    if relation == "eq":
        assert api["total"] > 10 and not summary.startswith("Results 1–10 of 10 ")
    else:
        assert api["total"] == 10 and f"of up to {api['total_max']} for" in summary
        assert api["total_max"] > 10  # the candidates: every page sharing a word


@pytest.mark.browser
def test_a_document_link_opens_on_its_own(page: WebDriver, live_server: LiveServer) -> None:
    """A #doc= link opened in a new tab (or reloaded): the document with its terms marked."""
    hit = live_server.post("/v1/search", {"query": QUERY, "lang": "de", "k": 1})["results"][0]
    fragment = urllib.parse.urlencode([("doc", hit["id"]), ("term", "table"), ("term", "the")])
    page.get(f"{live_server.url}/#{fragment}")
    wait(page).until(lambda d: d.find_element(By.ID, "doc-article").is_displayed())
    check_document_view(page, live_server, hit["id"], ["table", "the"])
    assert page.find_elements(By.CSS_SELECTOR, "#doc-text mark")
    note = page.find_element(By.CSS_SELECTOR, "#doc-found-by .found-note").text
    assert note.startswith("Open this document from a search result")
    page.find_element(By.ID, "doc-back").click()  # no results to go back to: the search tab
    wait(page).until(lambda d: d.find_element(By.ID, "panel-search").is_displayed())


@pytest.mark.browser
def test_an_unknown_document_shows_the_servers_404_message(
    page: WebDriver, live_server: LiveServer
) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        live_server.get("/v1/documents/no:such/doc", terms=["table"])
    assert caught.value.code == 404
    detail = json.load(caught.value)["detail"]
    page.get(f"{live_server.url}/#doc=no%3Asuch%2Fdoc&term=table")
    wait(page).until(lambda d: d.find_element(By.ID, "alert").is_displayed())
    assert page.find_element(By.ID, "alert").text == f"Error 404: {detail}"
    assert "no document 'no:such/doc'" in detail
    assert not page.find_element(By.ID, "doc-article").is_displayed()


def shown(driver: WebDriver, element_id: str) -> bool:
    return any(e.is_displayed() for e in driver.find_elements(By.ID, element_id))


def search_traces(driver: WebDriver) -> dict[str, object]:
    """What a previous search leaves on the page."""
    return {
        "results": len(results(driver, "search-results")),
        "summary": driver.find_element(By.ID, "search-summary").text,
        "translation": shown(driver, "search-translation"),
        "details": shown(driver, "search-details"),
        "pager": shown(driver, "search-pager"),
    }


def suggest_traces(driver: WebDriver) -> dict[str, object]:
    return {
        "results": len(results(driver, "suggest-results")),
        "summary": driver.find_element(By.ID, "suggest-summary").text,
        "translations": shown(driver, "suggest-translations"),
        "legend": shown(driver, "suggest-legend"),
    }


@pytest.mark.browser
def test_a_search_error_clears_the_previous_results(page: WebDriver) -> None:
    k = page.find_element(By.ID, "search-k")
    k.clear()
    k.send_keys("3")
    search(page, QUERY)
    before = search_traces(page)
    assert before["results"] == 3 and before["pager"] is True
    assert re.fullmatch(
        rf"Results 1–3 of (up to )?\d+\+? for “{re.escape(QUERY)}”", str(before["summary"])
    )
    k.clear()
    k.send_keys("5000")
    page.find_element(By.ID, "search-query").send_keys(Keys.ENTER)
    wait(page).until(lambda d: d.find_element(By.ID, "alert").is_displayed())
    empty = {"results": 0, "summary": "", "translation": False, "details": False, "pager": False}
    assert search_traces(page) == empty


@pytest.mark.browser
def test_a_translator_error_clears_the_previous_suggestions(page: WebDriver) -> None:
    page.find_element(By.ID, "tab-translate").click()
    sentence = page.find_element(By.ID, "suggest-sentence")
    sentence.send_keys("Wählen Sie eine Tabelle aus.", Keys.ENTER)
    wait(page).until(lambda d: results(d, "suggest-results"))
    assert suggest_traces(page)["translations"] is True
    suggest_k = page.find_element(By.ID, "suggest-k")
    suggest_k.clear()
    suggest_k.send_keys("500")
    sentence.send_keys(Keys.ENTER)
    wait(page).until(lambda d: d.find_element(By.ID, "alert").is_displayed())
    assert page.find_element(By.ID, "alert").text == "Error 422: Sentences: should be at most 100"
    assert suggest_traces(page) == {
        "results": 0,
        "summary": "",
        "translations": False,
        "legend": False,
    }


@pytest.mark.browser
def test_scores_and_signature_are_behind_details(page: WebDriver, live_server: LiveServer) -> None:
    search(page, QUERY)
    api = live_server.post("/v1/search", {"query": QUERY, "lang": "de", "k": 10, "explain": True})
    body = page.find_element(By.TAG_NAME, "body").text  # the text a reader sees
    assert api["signature"] not in body
    assert "method:" not in body and "score" not in body.lower()
    assert f"{api['results'][0]['score']:.3f}" not in body
    details = page.find_element(By.ID, "search-details")
    assert details.tag_name == "details" and details.get_attribute("open") is None
    summary = details.find_element(By.TAG_NAME, "summary")
    assert summary.text == "Details"
    summary.click()
    assert search_meta(page)["Scorer"] == api["signature"]
    # a result's score: behind its own "Details" button
    first = results(page, "search-results")[0]
    toggle = first.find_element(By.CSS_SELECTOR, ".explain-toggle")
    assert toggle.get_attribute("textContent") == "Details of result 1"
    assert toggle.get_attribute("aria-expanded") == "false"
    toggle.click()
    score = first.find_element(By.CSS_SELECTOR, ".score")
    assert score.is_displayed() and score.text == f"Score {api['results'][0]['score']:.3f}"


def set_viewport(driver: WebDriver, width: int, height: int = 900) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


FITS = """
const select = arguments[0];
const style = getComputedStyle(select);
const ctx = document.createElement("canvas").getContext("2d");
ctx.font = style.font;
const widest = Math.max(...Array.from(select.options).map(o => ctx.measureText(o.text).width));
const arrow = 24;  // the drop-down arrow's room
const room = select.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
return [widest, room - arrow];
"""


def overflow(driver: WebDriver) -> list[Any]:
    """Page width against the viewport, and the elements sticking out of the viewport."""
    found: list[Any] = driver.execute_script(
        "const w = document.documentElement.clientWidth;"
        "const out = Array.from(document.querySelectorAll('body *')).filter(e => {"
        "  const r = e.getBoundingClientRect();"
        "  return r.width > 0 && (r.right > w + 0.5 || r.left < -0.5) && !e.closest('.sr-only')"
        "    && !e.classList.contains('skip-link'); }).map(e => e.tagName + '#' + e.id + '.'"
        "    + e.className);"
        "return [document.documentElement.scrollWidth, w, out];"
    )
    return found


@pytest.mark.browser
@pytest.mark.parametrize("width", [360, 768, 1280])
def test_controls_are_readable_at_common_widths(page: WebDriver, width: int) -> None:
    set_viewport(page, width)
    try:
        page.get(page.current_url)
        wait(page).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#search-lang option"))
        assert page.execute_script("return window.innerWidth") == width
        method = page.find_element(By.ID, "search-method")
        for value in ("bowfd", "dt", "psq"):
            Select(method).select_by_value(value)
            widest, room = page.execute_script(FITS, method)
            assert widest <= room, (value, widest, room)
        # every control inside its form
        form = page.find_element(By.ID, "search-form").rect
        for control in page.find_elements(
            By.CSS_SELECTOR, "#search-form input, #search-form select, #search-form button"
        ):
            r = control.rect
            assert form["x"] <= r["x"] and r["x"] + r["width"] <= form["x"] + form["width"] + 0.5
        search(page, QUERY)
        page.find_element(By.CSS_SELECTOR, ".explain-toggle").click()
        page.find_element(By.CSS_SELECTOR, "#search-details > summary").click()
        scroll, client, out = overflow(page)
        assert scroll <= client and out == []
        screenshot(page, f"web-search-{width}.png")
        open_first_document(page)
        scroll, client, out = overflow(page)
        assert scroll <= client and out == []
        screenshot(page, f"web-document-{width}.png")
    finally:
        page.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.browser
def test_a_long_query_is_cut_short_in_the_heading(page: WebDriver) -> None:
    query = " ".join([QUERY] * 6)  # 185 characters
    search(page, query)
    summary = page.find_element(By.ID, "search-summary")
    echo = summary.find_element(By.CSS_SELECTOR, ".query-echo")
    short = query[:80].rstrip() + "…"
    assert re.fullmatch(rf"Results 1–10 of (up to )?\d+\+? for “{re.escape(short)}”", summary.text)
    assert echo.get_attribute("title") == query
    assert int(echo.value_of_css_property("font-weight")) < 600  # not in bold


@pytest.mark.browser
def test_query_inputs_are_limited_to_the_servers_maximum(page: WebDriver) -> None:
    def limits(driver: WebDriver) -> list[str | None]:
        ids = ("search-query", "suggest-sentence")
        return [driver.find_element(By.ID, i).get_attribute("maxlength") for i in ids]

    wait(page).until(lambda d: limits(d) == [str(MAX_QUERY_CHARS)] * 2)
    box = page.find_element(By.ID, "search-query")
    page.execute_script("arguments[0].focus()", box)
    box.send_keys("x" * (MAX_QUERY_CHARS + 20))
    assert len(box.get_attribute("value") or "") == MAX_QUERY_CHARS


@pytest.mark.browser
@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short", 80, "short"),
        ("a  b\n c", 80, "a b c"),
        ("abcdef", 3, "abc…"),
        ("ab cdef", 3, "ab…"),  # no space before the ellipsis
        ("😀😀😀😀", 2, "😀😀…"),  # code points, not UTF-16 halves
    ],
)
def test_truncate_by_hand(page: WebDriver, text: str, limit: int, expected: str) -> None:
    assert (
        page.execute_script("return ClirPage.truncate(arguments[0], arguments[1])", text, limit)
        == expected
    )


@pytest.mark.browser
def test_doc_links_by_hand(page: WebDriver) -> None:
    doc_id = "lo:text/a b&c#d.html"
    link = page.execute_script("return ClirPage.docHash(arguments[0], ['table', 'ü'])", doc_id)
    assert link == "#doc=lo%3Atext%2Fa+b%26c%23d.html&term=table&term=%C3%BC"
    target = page.execute_script("return ClirPage.parseDocHash(arguments[0])", link)
    assert target == {"id": doc_id, "terms": ["table", "ü"]}
    for other in ("", "#", "#main", "#doc="):
        assert page.execute_script("return ClirPage.parseDocHash(arguments[0])", other) is None


@pytest.mark.browser
def test_highlight_splitting_by_hand(page: WebDriver) -> None:
    def split(text: str, spans: list[list[int]]) -> list[list[tuple[str, bool]]]:
        paragraphs = page.execute_script(
            "return ClirPage.splitHighlights(arguments[0], arguments[1])", text, spans
        )
        return [[(p["text"], p["mark"]) for p in para] for para in paragraphs]

    assert split("ab cd\n\n  \nef", [[0, 2], [10, 12]]) == [
        [("ab", True), (" cd", False)],
        [("ef", True)],
    ]
    # offsets count code points, as the server's do: the emoji is one
    assert split("😀 table x", [[2, 7]]) == [[("😀 ", False), ("table", True), (" x", False)]]
    assert split("", []) == []


@pytest.mark.browser
def test_explanation_terms_by_hand(page: WebDriver) -> None:
    cases: list[tuple[dict[str, Any] | None, list[str]]] = [
        ({"translation": "insert table", "matched": ["table", "insert"]}, ["table", "insert"]),
        (
            {
                "sentences": [
                    {"matched": [{"term": "table"}, {"term": "row"}]},
                    {"matched": [{"term": "table"}]},
                ]
            },
            ["table", "row"],
        ),
        # (chromedriver passes objects with their keys sorted)
        ({"terms": {"ein": {}, "tabelle": {"chart": 0.1, "table": 0.8}}}, ["chart", "table"]),
        (None, []),
    ]
    for explanation, expected in cases:
        terms = page.execute_script("return ClirPage.explanationTerms(arguments[0])", explanation)
        assert terms == expected
        if explanation is not None:
            assert explanation_terms(explanation) == expected


def result_titles(driver: WebDriver) -> list[str] | None:
    """The titles on screen, or None while the list is being redrawn."""
    try:
        return [
            h.find_element(By.CSS_SELECTOR, ".result-title").text
            for h in results(driver, "search-results")
        ]
    except StaleElementReferenceException:
        return None


@pytest.mark.browser
def test_the_search_lives_in_the_address(page: WebDriver) -> None:
    search(page, QUERY)
    first = result_titles(page)
    shared = page.current_url
    assert "q=" in shared and "lang=de" in shared and "method=bowfd" in shared
    # the next page is an address of its own; back and forward move between them
    page.find_element(By.ID, "search-next").click()
    wait(page).until(lambda d: "page=2" in d.current_url and result_titles(d) != first)
    second = result_titles(page)
    assert second and page.find_element(By.ID, "search-page").text == "Page 2"
    page.back()
    wait(page).until(lambda d: "page=2" not in d.current_url and result_titles(d) == first)
    page.forward()
    wait(page).until(lambda d: "page=2" in d.current_url and result_titles(d) == second)
    # a reload shows the same results, and so does the address opened afresh (a shared link)
    page.refresh()
    wait(page).until(lambda d: result_titles(d) == second)
    page.get(shared)
    wait(page).until(lambda d: result_titles(d) == first)
    assert page.find_element(By.ID, "search-query").get_attribute("value") == QUERY
    # the open tab is kept too
    page.find_element(By.ID, "tab-translate").click()
    assert "tab=translate" in page.current_url
    page.refresh()
    wait(page).until(
        lambda d: d.find_element(By.ID, "tab-translate").get_attribute("aria-selected") == "true"
    )
    assert not page.find_element(By.ID, "panel-translate").get_attribute("hidden")


def alternative_buttons(driver: WebDriver) -> dict[str, list[tuple[str, bool]]]:
    """Each word offered, its options and whether each is pressed (chosen); empty while
    they are being redrawn."""
    out: dict[str, list[tuple[str, bool]]] = {}
    try:
        for group in driver.find_elements(By.CSS_SELECTOR, "#search-alternatives .alternative"):
            word = group.find_element(By.CSS_SELECTOR, ".source").text.rstrip(": ")
            out[word] = [
                (b.text, b.get_attribute("aria-pressed") == "true")
                for b in group.find_elements(By.CSS_SELECTOR, "button.option")
            ]
    except StaleElementReferenceException:
        return {}
    return out


@pytest.mark.browser
def test_a_words_translation_is_chosen_with_one_click_and_kept_in_the_address(
    page: WebDriver, live_server: LiveServer
) -> None:
    """The question's "Tabelle" offered as table or sheet; a click on "sheet" searches again
    with it pinned (the translation says it, the option is pressed), the address keeps it
    through a reload, back returns to the forest's own choice, a second click unpins."""
    search(page, QUERY)
    api = live_server.post("/v1/search", {"query": QUERY, "lang": "de", "k": 10})
    offered = alternative_buttons(page)
    assert offered == {
        a["source"]: [(o["english"], False) for o in a["options"]] for a in api["alternatives"]
    }
    assert [o for o, _ in offered["tabelle"]][:2] == ["table", "sheet"]
    first = result_titles(page)
    screenshot(page, "alternatives.png")
    page.find_element(By.XPATH, "//*[@id='search-alternatives']//button[text()='sheet']").click()
    wait(page).until(lambda d: "pin=tabelle%3Asheet" in d.current_url)
    wait(page).until(lambda d: ("sheet", True) in alternative_buttons(d).get("tabelle", []))
    body = {"query": QUERY, "lang": "de", "k": 10, "pins": {"tabelle": "sheet"}}
    pinned = live_server.post("/v1/search", body)
    wait(page).until(lambda d: result_titles(d) == [h["title"] for h in pinned["results"]])
    assert "sheet" in page.find_element(By.ID, "search-translation").text.split()
    assert result_titles(page) != first  # the pin changed what was found
    page.refresh()
    wait(page).until(lambda d: ("sheet", True) in alternative_buttons(d).get("tabelle", []))
    page.back()
    wait(page).until(lambda d: "pin=" not in d.current_url and result_titles(d) == first)
    assert all(not pressed for opts in alternative_buttons(page).values() for _, pressed in opts)
    page.forward()
    wait(page).until(lambda d: ("sheet", True) in alternative_buttons(d).get("tabelle", []))
    page.find_element(By.XPATH, "//*[@id='search-alternatives']//button[text()='sheet']").click()
    wait(page).until(lambda d: "pin=" not in d.current_url and result_titles(d) == first)


@pytest.mark.browser
def test_a_reference_sentence_opens_its_page_and_back_returns_to_it(
    page: WebDriver, live_server: LiveServer
) -> None:
    sentence = "Wählen Sie eine Tabelle aus."
    page.find_element(By.ID, "tab-translate").click()
    page.find_element(By.ID, "suggest-sentence").send_keys(sentence, Keys.ENTER)
    wait(page).until(lambda d: results(d, "suggest-results"))
    api = live_server.post("/v1/suggest", {"query": sentence, "lang": "de", "nbest": 5, "k": 10})
    on_pages = [r for r in api["results"] if r["page_id"]]
    assert on_pages, "the demo pool's sentences are on pages of the demo index"
    at = api["results"].index(on_pages[0])
    item = results(page, "suggest-results")[at]
    assert on_pages[0]["page_title"] in item.find_element(By.CSS_SELECTOR, ".result-meta").text
    # the translator's sentence is an address too: a reload shows the same suggestions
    assert "tab=translate" in page.current_url and "s=" in page.current_url
    page.refresh()
    wait(page).until(lambda d: len(results(d, "suggest-results")) == len(api["results"]))
    item = results(page, "suggest-results")[at]
    assert page.find_element(By.ID, "suggest-sentence").get_attribute("value") == sentence
    item.find_element(By.CSS_SELECTOR, ".reference-link").click()
    wait(page).until(lambda d: d.find_element(By.ID, "doc-view").is_displayed())
    wait(page).until(lambda d: d.find_element(By.ID, "doc-title").text)
    assert page.find_element(By.ID, "doc-title").text == on_pages[0]["page_title"]
    # on its page the suggested sentence's words are marked
    marked = {m.text.lower() for m in page.find_elements(By.CSS_SELECTOR, "#doc-text mark")}
    assert marked and marked <= {w.lower().strip(".,;:!?") for w in on_pages[0]["text"].split()}
    doc = live_server.get(f"/v1/documents/{on_pages[0]['page_id']}")
    assert doc["id"] == on_pages[0]["page_id"]
    page.find_element(By.ID, "doc-back").click()  # back to the suggestions, still there
    wait(page).until(lambda d: d.find_element(By.ID, "panel-translate").is_displayed())
    assert len(results(page, "suggest-results")) == len(api["results"])


@pytest.mark.browser
def test_a_text_over_the_limit_is_explained_in_the_searchers_words(page: WebDriver) -> None:
    # the input stops typing at the limit; a text that reaches the service anyway (pasted by a
    # script, a limit lowered since the page loaded) is refused with the limit, not a setting
    box = page.find_element(By.ID, "search-query")
    assert box.get_attribute("maxlength") == str(MAX_QUERY_CHARS)
    page.execute_script(
        "arguments[0].removeAttribute('maxlength'); arguments[0].value = arguments[1];",
        box, "Tabelle " * MAX_QUERY_CHARS,
    )  # fmt: skip
    box.send_keys(Keys.ENTER)
    wait(page).until(lambda d: d.find_element(By.ID, "alert").is_displayed())
    text = page.find_element(By.ID, "alert").text
    assert text == f"Your text is too long: shorten it to at most {MAX_QUERY_CHARS} characters."
    assert "CLIR_" not in text


@pytest.mark.browser
def test_feedback_switch_shows_the_added_words_and_lives_in_the_address(
    page: WebDriver, live_server: LiveServer
) -> None:
    query = "Seitenzahlen einfügen"  # BOW-FD ranking again with feedback reorders its page
    search(page, query)
    assert page.find_element(By.ID, "search-expansion").get_attribute("hidden")
    plain = result_titles(page)
    page.find_element(By.ID, "search-feedback").click()
    search(page, query)
    wait(page).until(lambda d: "fb=1" in d.current_url)
    api = live_server.post(
        "/v1/search",
        {
            "query": query,
            "lang": "de",
            "method": "bowfd",
            "k": 10,
            "feedback": True,
            "explain": True,
        },
    )
    line = page.find_element(By.ID, "search-expansion")
    assert not line.get_attribute("hidden")
    assert line.text == "Expanded with feedback: " + " ".join(api["expansion"]["added"])
    expanded = result_titles(page)
    assert expanded == [r["title"] for r in api["results"]] and expanded != plain
    # a result's details name the expanded query's words it matched
    page.find_element(By.CSS_SELECTOR, "#search-results .explain-toggle").click()
    details = page.find_element(By.CSS_SELECTOR, "#search-results .explanation").text
    assert "Matched words of the expanded query:" in details
    if api["results"][0]["explanation"]["first"] is not None:  # BOW-FD's own, mixed in
        assert "Translation that retrieved it" in details
    assert all(m["term"] in details for m in api["results"][0]["explanation"]["matched"])
    # a reload (a shared link) keeps the switch and the expanded results
    page.refresh()
    wait(page).until(lambda d: result_titles(d) == expanded)
    assert page.find_element(By.ID, "search-feedback").is_selected()
    page.back()  # before the switch: the plain search
    wait(page).until(lambda d: "fb=1" not in d.current_url and result_titles(d) == plain)
    assert not page.find_element(By.ID, "search-feedback").is_selected()
    assert page.find_element(By.ID, "search-expansion").get_attribute("hidden")


@pytest.mark.browser
def test_the_feedback_switch_follows_the_service_default(
    chrome: WebDriver, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = demo_settings(tmp_path_factory.mktemp("jobs-fb"))  # shipped: feedback on
    with LiveServer(settings) as server:
        chrome.get(server.url + "/")
        wait(chrome).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#search-lang option"))
        box = chrome.find_element(By.ID, "search-feedback")
        assert box.is_selected()  # on by default
        search(chrome, "Tabelle sortieren")
        assert "fb=" not in chrome.current_url  # the default needs no mark in the address
        assert not chrome.find_element(By.ID, "search-expansion").get_attribute("hidden")
        # what a request that does not say gets: the expanded results, explained and opened
        api = server.post(
            "/v1/search",
            {"query": "Tabelle sortieren", "lang": "de", "method": "bowfd", "k": 10,
             "explain": True},
        )  # fmt: skip
        assert api["expansion"] is not None
        assert result_titles(chrome) == [r["title"] for r in api["results"]]
        open_first_document(chrome)
        hit = api["results"][0]
        check_document_view(chrome, server, hit["id"], explanation_terms(hit["explanation"]))
        chrome.back()
        wait(chrome).until(lambda d: result_titles(d))
        box.click()  # off: the address says so, and a reload keeps it off
        search(chrome, "Tabelle sortieren")
        wait(chrome).until(lambda d: "fb=0" in d.current_url)
        chrome.refresh()
        wait(chrome).until(lambda d: result_titles(d))
        assert not chrome.find_element(By.ID, "search-feedback").is_selected()
        assert chrome.find_element(By.ID, "search-expansion").get_attribute("hidden")


def readers_label(readers: dict[str, int]) -> str:
    """How the page labels a result's readers: "found by words #2 · meaning #1"."""
    names = {"lexical": "words", "dense": "meaning"}
    return "found by " + " · ".join(f"{names[k]} #{readers[k]}" for k in names if k in readers)


@pytest.mark.browser
def test_the_dense_switch_shows_which_reader_found_each_result(
    chrome: WebDriver, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = demo_settings(tmp_path_factory.mktemp("jobs-dense"), feedback=False)
    query = "Wie füge ich eine Tabelle ein?"
    with LiveServer(settings) as server:
        chrome.get(server.url + "/")
        wait(chrome).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#search-lang option"))
        box = chrome.find_element(By.ID, "search-dense")
        assert box.is_displayed() and box.is_selected()  # the demo index has vectors: on
        search(chrome, query)
        assert "dn=" not in chrome.current_url  # the default needs no mark in the address
        body = {"query": query, "lang": "de", "method": "bowfd", "k": 10, "explain": True,
                "feedback": False}  # fmt: skip
        api = server.post("/v1/search", body)
        assert api["dense"] == "on"
        assert result_titles(chrome) == [r["title"] for r in api["results"]]
        labels = [
            e.text for e in chrome.find_elements(By.CSS_SELECTOR, "#search-results .found-by")
        ]
        assert labels == [readers_label(r["readers"]) for r in api["results"]]
        assert any("meaning" in label for label in labels)
        fused = result_titles(chrome)
        box.click()  # off: the forest alone, the address says so, a reload keeps it
        search(chrome, query)
        wait(chrome).until(lambda d: "dn=0" in d.current_url)
        alone = server.post("/v1/search", body | {"dense": False})
        assert result_titles(chrome) == [r["title"] for r in alone["results"]]
        assert not chrome.find_elements(By.CSS_SELECTOR, "#search-results .found-by")
        chrome.refresh()
        wait(chrome).until(lambda d: result_titles(d))
        assert not chrome.find_element(By.ID, "search-dense").is_selected()
        chrome.back()  # the fused search again
        wait(chrome).until(lambda d: "dn=0" not in d.current_url and result_titles(d) == fused)
        assert chrome.find_element(By.ID, "search-dense").is_selected()
