"""The web page for searchers and translators: ``GET /`` and its static files.

The page is plain HTML, CSS and JavaScript modules in ``service/api/web/`` (``js/main.js``, the
one script the page names, imports the others; no build step, nothing loaded from elsewhere);
it calls the REST API of the same origin (``/readyz`` — the loaded languages and
``max_query_chars``, the inputs' maxlength —, ``/v1/search`` — Hieber & Riezler 2015, §3,
BOW-FD/DT/PSQ with the derivation that retrieved each document —,
``/v1/documents/{id}?terms=`` — the document view a result links to (``#doc=<id>``), with the
matched words' spans — and ``/v1/suggest`` — the TR paper, translation retrieval). Only the files
named in :data:`STATIC_FILES` are served, read once at import, so no request path ever reaches the
file system.

Every response of this router carries :data:`SECURITY_HEADERS`: a Content-Security-Policy
that allows only the page's own scripts, styles and images (no inline script or style, no
plugins, no ``<base>``, no framing) and the usual ``nosniff``/``no-referrer``/``DENY``
headers, so that text from the API or the user can never run as code even if it were
rendered as markup (the script builds the DOM with ``textContent`` only).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

WEB_DIR = Path(__file__).resolve().parent / "web"

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


class WebFile(NamedTuple):
    body: bytes
    media_type: str


_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

# URL name -> file in WEB_DIR; nothing else is ever served. The page's script is js/main.js,
# an ES module, and every module it imports (tests/api/test_page.py checks that the list and
# the import graph agree).
JS_MODULES = (
    "main.js",
    "api.js",
    "diff.js",
    "docview.js",
    "dom.js",
    "explanation.js",
    "languages.js",
    "search.js",
    "tabs.js",
    "text.js",
    "translator.js",
)
STATIC_FILES = ("style.css", "favicon.svg", *(f"js/{name}" for name in JS_MODULES))


def _load(name: str) -> WebFile:
    path = WEB_DIR / name
    try:
        body = path.read_bytes()
    except OSError as exc:  # a broken installation, not a user error
        raise RuntimeError(
            f"the web page file {path} cannot be read ({exc}); reinstall the package "
            "(pyproject.toml lists service/api/web/* and web/js/* as package data)"
        ) from exc
    return WebFile(body, _MEDIA_TYPES[path.suffix])


def page_response(file: WebFile) -> Response:
    """``file`` with :data:`SECURITY_HEADERS`."""
    return Response(content=file.body, media_type=file.media_type, headers=SECURITY_HEADERS)


INDEX = _load("index.html")
STATIC: dict[str, WebFile] = {name: _load(name) for name in STATIC_FILES}

router = APIRouter(tags=["page"], include_in_schema=False)


@router.api_route("/", methods=["GET", "HEAD"], response_class=Response)
def index() -> Response:
    """The web page: search and translator tabs."""
    return page_response(INDEX)


@router.api_route("/static/{name:path}", methods=["GET", "HEAD"], response_class=Response)
def static(name: str) -> Response:
    """One of the page's own scripts, styles or images."""
    file = STATIC.get(name)
    if file is None:
        detail = f"no static file {name!r}; the page's files are {', '.join(STATIC_FILES)}"
        return JSONResponse({"detail": detail}, status_code=404, headers=SECURITY_HEADERS)
    return page_response(file)
