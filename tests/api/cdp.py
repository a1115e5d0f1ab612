"""A headless Chromium driven over the Chrome DevTools Protocol (websocket-client).

Only what the page test needs: launch with a fresh profile, navigate, evaluate JavaScript,
wait for a condition, press keys. Debian's ``chromium``; missing outside CI: skip; in CI:
fail (the CI installs it).
"""

from __future__ import annotations

import itertools
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

__all__ = ["Browser", "find_chromium"]

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-port=0"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    return None


class Browser:
    def __init__(self, binary: str, profile: Path) -> None:
        import websocket

        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}",
                                      "about:blank"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (active.exists() and active.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        port = int(active.read_text().split()[0])
        pages = []
        while not pages and time.monotonic() < deadline:
            pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json()
                     if t["type"] == "page"]
            time.sleep(0.1)
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=30,
                                              suppress_origin=True)
        self._ids = itertools.count(1)
        self.exceptions: list[dict[str, Any]] = []
        # Network.* events seen (after ``send("Network.enable")``): what the page asked for
        self.network: list[dict[str, Any]] = []
        self.send("Runtime.enable")
        self.send("Page.enable")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == "Runtime.exceptionThrown":
                self.exceptions.append(msg["params"]["exceptionDetails"])
            elif str(msg.get("method", "")).startswith("Network."):
                self.network.append(msg)
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def js(self, expression: str) -> Any:
        out = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression!r}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def wait(self, expression: str, timeout: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.js(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            time.sleep(0.1)
        said = self.js("document.getElementById('message')?.textContent")
        raise AssertionError(f"timed out waiting for {expression!r}; page says: {said!r}")

    def viewport(self, width: int, height: int) -> None:
        """Lay the page out at ``width`` × ``height`` CSS pixels (a window of that size)."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the page (all of it with ``full_page``) written to ``path``."""
        import base64
        out = self.send("Page.captureScreenshot", format="png",
                        captureBeyondViewport=full_page)
        path.write_bytes(base64.b64decode(out["data"]))
        return path

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", text=text)

    def press(self, key: str) -> None:
        code = ord(key.upper()) if len(key) == 1 else 13
        base = {"key": key, "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code}
        if key.isdigit():
            base["code"] = f"Digit{key}"
        self.send("Input.dispatchKeyEvent", type="keyDown", text=key if len(key) == 1 else "\r",
                  **base)
        self.send("Input.dispatchKeyEvent", type="keyUp", **base)

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001 - best effort, the process goes next
            pass
        if self.proc.poll() is None:
            import os
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
