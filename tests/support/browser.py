"""A real headless Chromium (Debian's ``chromium``), driven over the DevTools protocol.

Nothing is downloaded at run time: the browser is the system package and the
client is ``websocket-client``. A page is opened with the network switched off
(``Network.emulateNetworkConditions`` offline), and everything the page logs
as an error, every uncaught exception and every request that would leave the
machine is collected, so a test can assert that a report works on its own.

Launch flags: the ones that work in a container as root without a display or
a GPU, and that keep Chromium from phoning home (updates, sync, QUIC probes).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSTALL_HINT = "install Chromium to run the browser tests: sudo apt-get install -y chromium (.ci/run does it)"

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
]


def find_chromium() -> str | None:
    """The browser binary: ``$LOADTEST_CHROMIUM``, or Debian's ``chromium`` on the PATH."""
    explicit = os.environ.get("LOADTEST_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageReport:
    """What happened while a page loaded and rendered."""

    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    #: Requests to anything but the page's own file/data/blob URLs (would need a network).
    outside_requests: list[str] = field(default_factory=list)
    failed_loads: list[str] = field(default_factory=list)


class Chromium:
    """One headless browser; :meth:`open` loads a page offline and returns what it logged."""

    def __init__(self, binary: str, width: int = 1280, height: int = 1000, *, offline: bool = True) -> None:
        self.binary = binary
        #: Off: the page may reach 127.0.0.1 (a live web UI); a report must not need it.
        self.offline = offline
        self.width, self.height = width, height
        self._ids = itertools.count(1)
        self._profile = tempfile.mkdtemp(prefix="loadtest-chromium-")
        self._proc: subprocess.Popen | None = None
        self._ws = None
        self.events: list[dict] = []

    # -- life cycle -----------------------------------------------------------------
    def __enter__(self) -> "Chromium":
        import websocket  # websocket-client

        self._proc = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self._profile}", "--remote-debugging-port=0",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
        )
        port = self._debugging_port()
        with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT"), timeout=10) as r:
            target = json.loads(r.read())
        self._ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        if self.offline:
            self.send("Network.emulateNetworkConditions", offline=True, latency=0, downloadThroughput=-1, uploadThroughput=-1)
        self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height, deviceScaleFactor=1, mobile=False)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._ws is not None:
            self._ws.close()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        shutil.rmtree(self._profile, ignore_errors=True)

    def _debugging_port(self, timeout_s: float = 30.0) -> int:
        """Chromium writes the port it chose into the profile folder."""
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if marker.is_file():
                first = marker.read_text().split("\n", 1)[0].strip()
                if first.isdigit():
                    return int(first)
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"chromium exited with code {self._proc.returncode} before it listened")
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port")

    # -- protocol ---------------------------------------------------------------------
    def send(self, method: str, **params: Any) -> dict:
        """Send one command and wait for its answer; events seen meanwhile are kept."""
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self._ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def _wait_for_event(self, method: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        if any(e.get("method") == method for e in self.events):
            return
        self._ws.settimeout(1.0)
        try:
            while time.monotonic() < deadline:
                try:
                    msg = json.loads(self._ws.recv())
                except Exception:  # noqa: BLE001 - a receive timeout: look again until the deadline
                    continue
                self.events.append(msg)
                if msg.get("method") == method:
                    return
        finally:
            self._ws.settimeout(30)
        raise TimeoutError(f"no {method} within {timeout_s:g} s")

    # -- pages ------------------------------------------------------------------------
    def open(self, path: Path | str, *, settle_s: float = 1.0, timeout_s: float = 60.0) -> PageReport:
        """Load a local file (or, with ``offline=False``, a URL); return the errors it logged."""
        self.events.clear()
        url = path.resolve().as_uri() if isinstance(path, Path) else path
        self.send("Page.navigate", url=url)
        self._wait_for_event("Page.loadEventFired", timeout_s)
        time.sleep(settle_s)  # plotly draws on animation frames after load
        self.evaluate("1")  # drains the events logged meanwhile
        return self._report()

    def _report(self) -> PageReport:
        report = PageReport()
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                report.console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                report.console_errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                report.exceptions.append(details.get("exception", {}).get("description") or details.get("text", "?"))
            elif method == "Network.requestWillBeSent":
                url = params.get("request", {}).get("url", "")
                if not url.startswith(("file:", "data:", "blob:", "about:", "http://127.0.0.1:")):
                    report.outside_requests.append(url)
            elif method == "Network.loadingFailed":
                report.failed_loads.append(f"{params.get('errorText')} ({params.get('type')})")
        return report

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1})
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def print_pdf(self, path: Path) -> Path:
        """The page as "Save as PDF" prints it (print media CSS applies)."""
        data = self.send("Page.printToPDF", printBackground=False, preferCSSPageSize=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


#: Per plot: its traces, the traces plotly drew, and the SVG paths with a drawn shape.
PLOTS_JS = """
Array.from(document.querySelectorAll('.js-plotly-plot')).map(function (d) {
  var drawn = Array.from(d.querySelectorAll('.cartesianlayer g.trace, .cartesianlayer g.boxes'));
  return {
    title: (d.layout && d.layout.title && (d.layout.title.text || d.layout.title)) || d.id,
    traces: (d.data || []).length,
    with_data: (d._fullData || []).filter(function (t) {
      var ys = t.y || [];
      return t.visible === true && Array.prototype.some.call(ys, function (v) { return v !== null && v !== undefined && !Number.isNaN(v); });
    }).length,
    drawn_traces: drawn.length,
    drawn_paths: Array.from(d.querySelectorAll('.cartesianlayer path')).filter(function (p) {
      var dd = p.getAttribute('d'); return dd && dd !== 'M0,0Z' && dd.length > 4;
    }).length,
    traces_with_paths: drawn.filter(function (g) {
      return Array.from(g.querySelectorAll('path')).some(function (p) { var dd = p.getAttribute('d'); return dd && dd.length > 4; });
    }).length,
    height: d.getBoundingClientRect().height
  };
})
"""
