"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) render from labelq alone (issue 43): their
assets are served by the API itself, so the pages work without internet, and nothing the
pages load comes from another host (labelq/api/apidocs.py)."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from labelq.api.apidocs import ASSETS, ASSETS_PATH, vendor_dir

from .cdp import Browser


class _Refs(HTMLParser):
    """Every URL a page names in ``src`` or ``href`` (and ReDoc's ``spec-url``)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("src", "href", "spec-url") and v]


def _refs(html: str) -> list[str]:
    parser = _Refs()
    parser.feed(html)
    return parser.urls


def test_the_packaged_assets_are_there():
    """The package the bundles come from has every file the pages load (a new version that
    moved one fails here, not in an operator's browser)."""
    for name, (where, _) in ASSETS.items():
        if where == "vendor":
            assert (vendor_dir() / name).stat().st_size > 1000, name


@pytest.mark.timeout(120)
@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_every_asset_of_the_docs_pages_is_local_and_served(stack, page):
    with httpx.Client(base_url=stack.base, timeout=30) as http:
        r = http.get(page)
        assert r.status_code == 200
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp
        assert "<script>" not in r.text  # no inline script: the CSP would refuse it
        urls = _refs(r.text)
        assert urls, "the page loads nothing?"
        for url in urls:
            full = urljoin(stack.base + page, url)
            assert urlsplit(full).netloc == urlsplit(stack.base).netloc, url
            got = http.get(full)
            assert got.status_code == 200, (url, got.status_code)
            if url.startswith(ASSETS_PATH):
                assert got.headers["content-type"] == ASSETS[url.rsplit("/", 1)[1]][1]
                assert len(got.content) > 100


def _rendered(browser: Browser, url: str, ready: str) -> list[tuple[str, str | None]]:
    """Open ``url``, wait until ``ready`` holds, and return each request the page made as
    (url, why it failed: ``None`` if it did not)."""
    browser.send("Network.enable")
    browser.network.clear()
    browser.navigate(url)
    browser.wait(ready, timeout=90)
    browser.js("1")  # read the events sent meanwhile
    failed = {e["params"]["requestId"]: e["params"].get("blockedReason") or
              e["params"].get("errorText") for e in browser.network
              if e["method"] == "Network.loadingFailed"}
    return [(e["params"]["request"]["url"], failed.get(e["params"]["requestId"]))
            for e in browser.network if e["method"] == "Network.requestWillBeSent"]


@pytest.mark.timeout(240)
def test_swagger_ui_and_redoc_render_the_operations_with_no_other_host(stack, browser):
    host = urlsplit(stack.base).netloc
    # Swagger UI: the operations of the schema, one block each
    requests = _rendered(browser, stack.base + "/docs",
                         "document.querySelectorAll('.opblock').length >= 10")
    summaries = browser.js("[...document.querySelectorAll('.opblock-summary-path')]"
                           ".map(e => e.textContent)")
    assert "/api/v1/assignments/next" in summaries and "/api/v1/projects" in summaries
    assert browser.exceptions == []
    assert {urlsplit(u).netloc for u, _ in requests} == {host}, requests
    assert all(why is None for _, why in requests), requests
    # ReDoc: the same operations in its menu; its footer's logo (on Redocly's host) is
    # refused by the page's CSP before any request leaves
    requests = _rendered(browser, stack.base + "/redoc",
                         "document.querySelectorAll('[data-section-id]').length >= 10")
    assert browser.js("document.body.innerText.includes('My next assignment')")
    others = [(u, why) for u, why in requests
              if urlsplit(u).netloc != host and not u.startswith(("data:", "blob:"))]
    assert all(why == "csp" for _, why in others), others
    assert all(why is None for u, why in requests if urlsplit(u).netloc == host), requests
