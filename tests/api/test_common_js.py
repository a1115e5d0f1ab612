"""The pages' shared script, /static/common.js: served as JavaScript like the pages (no
sign-in, not cached), loaded by both pages, shipped in the package data; and its `call()`
in Chromium: a network failure, a non-JSON answer and a refused token as each page needs."""

from __future__ import annotations

import fnmatch
import json
import re
import sys

import pytest

from labelq.api.app import COMMON_SCRIPT, COMMON_SCRIPT_PATH

from .cdp import Browser
from .conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = None

PAGES = ["/label", "/dashboard"]


def test_the_script_is_served_and_both_pages_load_it(stack):
    with stack.client() as c:
        js = c.get(COMMON_SCRIPT_PATH)
        pages = {p: c.get(p) for p in PAGES}
    # The script: JavaScript, no sign-in needed, not cached, not sniffed
    assert js.status_code == 200
    assert js.headers["content-type"] == "text/javascript; charset=utf-8"
    assert js.headers["cache-control"] == "no-store"
    assert js.headers["x-content-type-options"] == "nosniff"
    assert js.text == COMMON_SCRIPT.read_text(encoding="utf-8")
    assert "function apiCaller(" in js.text and "function say(" in js.text
    for path, page in pages.items():
        # Each page loads it before its own script, and its CSP lets it ('self')
        assert page.status_code == 200, path
        tag = f'<script src="{COMMON_SCRIPT_PATH}"></script>'
        assert page.text.count(tag) == 1, path
        own = f'<script src="/static{path}.js"></script>'
        assert page.text.index(tag) < page.text.index(own), path
        script_src = [d for d in page.headers["content-security-policy"].split(";")
                      if d.strip().startswith("script-src")]
        # (issue 45: scripts from this server only — 'unsafe-inline' is gone, and so is
        # every inline script and handler attribute it allowed)
        assert script_src and script_src[0].split() == ["script-src", "'self'"], path
        assert "unsafe-inline" not in script_src[0] and "unsafe-eval" not in script_src[0]
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page.text), path
        assert not re.search(r"\son[a-z]+\s*=", page.text), path
        assert "javascript:" not in page.text, path
        # and keeps no copy of its own
        assert "function say(" not in page.text and "async function call(" not in page.text
    with stack.client() as c:  # (an asset, not part of the API)
        assert COMMON_SCRIPT_PATH not in c.get("/openapi.json").json()["paths"]


@pytest.mark.skipif(tomllib is None, reason="tomllib: Python 3.11+")
def test_every_static_file_is_package_data():
    """A non-editable install (the Dockerfile's `pip install .`) ships only the files the
    package-data globs name."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = conf["tool"]["setuptools"]["package-data"]["labelq.api"]
    static = COMMON_SCRIPT.parent
    files = sorted(p.relative_to(static.parent).as_posix() for p in static.iterdir()
                   if p.is_file())
    assert "static/common.js" in files
    missing = [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert missing == []


def _failure(b: Browser, call: str, answer: str | None = None) -> dict:
    """What `call` (a `call(...)` expression on the page) threw, as JSON; with `answer`
    (a JavaScript expression), `fetch` gives that instead of asking the server."""
    if answer is not None:
        call = (f"(() => {{ const f = window.fetch; window.fetch = () => {answer}; "
                f"const p = {call}; window.fetch = f; return p; }})()")
    return json.loads(b.js(f"{call}.then(() => 'null', (e) => JSON.stringify(e))"))


def _response(status: int, body: str, content_type: str) -> str:
    return (f"Promise.resolve(new Response({json.dumps(body)}, {{status: {status}, "
            f"headers: {{'content-type': {json.dumps(content_type)}}}}}))")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("page,refused", [("/label", [401]), ("/dashboard", [401, 403])])
def test_call_reports_failures_readably_and_signs_out_as_the_page_needs(stack, browser,
                                                                         page, refused):
    b = browser
    b.navigate(stack.base + page)
    b.wait("document.readyState === 'complete' && typeof call === 'function'")
    # A non-JSON success (here the script itself, 200 text/javascript): reported as such
    err = _failure(b, 'call("GET", "/../../static/common.js")')
    assert err["code"] == "not_json" and err["status"] == 200, err
    assert err["message"].startswith("the server answered HTTP 200"), err
    assert err["message"].endswith("(expected JSON)") and len(err["message"]) < 300, err
    # A proxy's HTML error page: its status and title, not its markup
    html = "<html><head><title>502 Bad Gateway</title></head><body><h1>nginx</h1></body>"
    err = _failure(b, 'call("GET", "/me")', _response(502, html, "text/html"))
    assert err["status"] == 502 and err["code"] == "error", err
    assert err["message"] == "the server answered HTTP 502: 502 Bad Gateway", err
    # An API error: its own message
    err = _failure(b, 'call("GET", "/no/such/route")')
    assert err["status"] == 404 and err["code"] == "not_found", err
    assert not err["message"].startswith("the server answered"), err
    # A network failure: a clear message, no status
    err = _failure(b, 'call("GET", "/me")', 'Promise.reject(new TypeError("Failed to fetch"))')
    assert err["code"] == "network" and "status" not in err, err
    assert err["message"].startswith("cannot reach the server"), err
    # A refused token signs out on the statuses the page names (401 for an annotator, whose
    # 403 means "not yours" or "paused"; 401 and 403 for the operator), not on others
    for status in (401, 403):
        b.js("token = 'a-token'; document.getElementById('signin').hidden = true; 1")
        body = json.dumps({"code": "x", "message": f"refused {status}"})
        err = _failure(b, 'call("GET", "/me")', _response(status, body, "application/json"))
        assert err == {"status": status, "code": "x", "message": f"refused {status}"}
        signed_out = b.js("!document.getElementById('signin').hidden && token === ''")
        assert signed_out == (status in refused), (page, status)
    assert b.exceptions == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("page", PAGES)
def test_the_pages_run_under_a_csp_that_refuses_inline_scripts(stack, browser, page):
    """Issue 45: the CSP allowed inline scripts though the docs called it strict. Now the
    pages' scripts are files from the server, and Chromium runs them under a CSP that
    refuses an inline script (one a markup injection would add)."""
    b = browser
    b.navigate(stack.base + page)
    # The page's own script ran (its sign-in form is wired, common.js's call is there)
    b.wait("document.readyState === 'complete' && typeof call === 'function' "
           "&& typeof signIn === 'function'")
    # An inline script put into the page is refused by the browser, and says so
    b.js("window.violations = []; document.addEventListener('securitypolicyviolation', "
         "(e) => window.violations.push(e.violatedDirective)); 1")
    b.js("const s = document.createElement('script'); s.textContent = 'window.injected = 1';"
         " document.body.appendChild(s); "
         "const d = document.createElement('div'); d.innerHTML = "
         "'<img src=\"data:,x\" onerror=\"window.injected = 2\">'; "
         "document.body.appendChild(d); 1")
    b.wait("window.violations.length >= 2")  # (the script, the handler)
    assert b.js("typeof window.injected") == "undefined"
    assert all(v.startswith("script-src") for v in b.js("window.violations")), \
        b.js("window.violations")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("page,key,shown", [
    ("/label", "labelq-token", ["who", "progress", "signout", "work"]),
    ("/dashboard", "labelq-operator-token", ["board", "pick", "refresh", "signout"])])
def test_both_pages_sign_in_and_out_through_common_js(stack, browser, page, key, shown):
    """Signing in and out is common.js's (showSignedIn / showSignedOut), not a copy per page:
    the token kept for the tab, the page's parts shown, the form hidden, and back."""
    own = (COMMON_SCRIPT.parent / f"{page.strip('/')}.js").read_text(encoding="utf-8")
    assert "showSignedIn(" in own and "showSignedOut(" in own
    # (the token's key is kept and dropped by common.js only; a page may keep other things,
    # as the labeling page keeps the project picked)
    for call in ("sessionStorage.setItem", "sessionStorage.removeItem"):
        for arg in (f'"{key}"', "TOKEN_KEY"):
            assert f"{call}({arg}" not in own, (call, arg)
    b = browser
    b.navigate(stack.base + page)
    b.wait("document.readyState === 'complete' && typeof showSignedIn === 'function'")
    hidden = f"{json.dumps(shown)}.map((id) => document.getElementById(id).hidden)"
    # Signed in: the token kept under the page's key, its parts shown, the form hidden
    b.js(f"document.getElementById('token').value = 'typed'; "
         f"showSignedIn({json.dumps(key)}, 'tok-1', SIGNED_IN); 1")
    assert b.js(f"sessionStorage.getItem({json.dumps(key)})") == "tok-1"
    assert b.js(hidden) == [False] * len(shown)
    assert b.js("document.getElementById('signin').hidden") is True
    assert b.js("document.getElementById('token').value") == ""
    # Signed out (the page's own signOut): the token forgotten, the form back, said why
    b.js("signOut('signed out'); 1")
    assert b.js(f"sessionStorage.getItem({json.dumps(key)})") is None
    assert b.js(hidden) == [True] * len(shown)
    assert b.js("document.getElementById('signin').hidden") is False
    assert b.js("document.getElementById('message').textContent") == "signed out"
    assert b.exceptions == []
