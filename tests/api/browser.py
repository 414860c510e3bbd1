"""Helpers for the browser tests (marker ``browser``): the app served by uvicorn on a free
loopback port, and Debian's headless Chromium driven through chromedriver (``make browser``
installs both). One Chromium serves every browser test of a session (the ``chrome`` fixture of
tests/api/integration/conftest.py): offline — no host but 127.0.0.1 resolves, as on a host
without internet — and keeping its console and its network log."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from service.api.app import create_app
from service.core.settings import Settings

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
#: no host name resolves but the loopback's: a page that needs the internet shows it
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"


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

    def get(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=60) as response:
            return json.load(response)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.load(response)


@contextmanager
def headless_chromium(
    profile: Path, logs: Sequence[str] = ("browser",), extra_flags: Sequence[str] = ()
) -> Iterator[WebDriver]:
    """Chromium with the profile directory ``profile``, keeping every entry of the ``logs``
    kinds (``driver.get_log(kind)``); it quits on leaving. A missing Chromium fails the test."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            pytest.fail(f"{path} is missing: run `make browser` (Debian chromium, chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*CHROMIUM_FLAGS, *extra_flags]:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", dict.fromkeys(logs, "ALL"))
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def requested_urls(driver: WebDriver) -> list[str]:
    """URLs of the requests Chromium sent since its network log was last read."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def leaving(urls: list[str]) -> list[str]:
    """The URLs that leave 127.0.0.1 (``data:`` and ``blob:`` URLs stay in the browser)."""
    return [
        u
        for u in urls
        if urlsplit(u).scheme in ("http", "https", "ws", "wss")
        and urlsplit(u).hostname != "127.0.0.1"
    ]
