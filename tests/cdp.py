"""A tiny Chrome DevTools Protocol driver for the report tests: headless
Debian chromium, one page, console errors and exceptions collected,
JavaScript evaluated, screenshots taken. Installs nothing; needs the
`chromium` binary (the Makefile's install-dev installs it) and the
`websocket-client` package (dev dependency)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--remote-allow-origins=*",
]


def chromium_path() -> Optional[str]:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, width: int = 1400, height: int = 2000, timeout: float = 30.0):
        import websocket  # websocket-client

        exe = chromium_path()
        if exe is None:
            raise RuntimeError("chromium is not installed (make install-dev installs it)")
        self.profile = tempfile.mkdtemp(prefix="ccbench-chromium-")
        # Chromium's own temporary files (its singleton socket's directory, which a terminated Chromium
        # leaves) go inside the profile, removed with it.
        tmp = os.path.join(self.profile, "tmp")
        os.mkdir(tmp)
        self.proc = subprocess.Popen(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, TMPDIR=tmp),
        )
        try:
            port_file = Path(self.profile) / "DevToolsActivePort"
            deadline = time.monotonic() + timeout
            while not (port_file.exists() and port_file.read_text().strip()):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("chromium did not start its DevTools endpoint")
                time.sleep(0.05)
            port = int(port_file.read_text().split()[0])
            targets = []
            while not targets:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    targets = [t for t in json.load(r) if t.get("type") == "page"]
                if not targets:
                    if time.monotonic() > deadline:
                        raise RuntimeError("chromium has no page")
                    time.sleep(0.05)
            self.ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"], timeout=timeout,
                                                  suppress_origin=True)
        except BaseException:
            self.close()
            raise
        self.timeout = timeout
        self._id = 0
        self.events: list[dict] = []
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    # -- protocol
    def call(self, method: str, **params: Any) -> dict:
        self._id += 1
        my = self._id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(method)

    def pump(self, seconds: float) -> None:
        """Collect events for a while (without a call of our own)."""
        self.call("Runtime.evaluate", expression="0")
        end = time.monotonic() + seconds
        self.ws.settimeout(0.1)
        try:
            while time.monotonic() < end:
                try:
                    msg = json.loads(self.ws.recv())
                except Exception:
                    continue
                if "method" in msg:
                    self.events.append(msg)
        finally:
            self.ws.settimeout(self.timeout)

    def navigate(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + self.timeout
        while not any(e["method"] == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"loading {url}")
            self.pump(0.1)

    def eval(self, expression: str) -> Any:
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            v = self.eval(expression)
            if v:
                return v
            if time.monotonic() > deadline:
                raise TimeoutError(expression)
            self.pump(0.1)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + str(p["entry"].get("text")) + " " + str(p["entry"].get("url", "")))
        return out

    def screenshot(self, path: str | Path, full_page: bool = False) -> Path:
        params: dict = {"format": "png"}
        if full_page:
            m = self.call("Page.getLayoutMetrics")
            size = m.get("cssContentSize") or m["contentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000),
                              "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", **params)["data"]
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(base64.b64decode(data))
        return p

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
