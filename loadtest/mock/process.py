"""The mock as a managed subprocess, for tests, the demo and the benchmarks.

Why a subprocess and not a thread: the mock must keep its timing while the
caller hammers it, so it gets its own interpreter (its own GIL, its own event
loop, its own core when there is one). Why ``--port 0``: parallel test runs
never fight over a port; the port is read back from the listening line.

Every wait is bounded: startup (the listening line, then ``/health``) and
shutdown (SIGTERM, then SIGKILL after a timeout).

::

    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "20"]) as mock:
        client = openai.OpenAI(base_url=mock.base_url, api_key="x")
        ...
        mock.requests_by_status()   # {200: 3}
        mock.metrics()              # {'loadtest_mock_requests_total{status="200"}': 3.0, ...}
"""

from __future__ import annotations

import collections
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from types import TracebackType
from typing import Sequence

from loadtest.mock.config import MockConfig
from loadtest.mock.metrics import parse_prometheus_text

_LISTENING_RE = re.compile(r"loadtest mock listening on (https?)://(\[[^\]]+\]|[^\s:/]+):(\d+)")

#: Never use a proxy from the environment to reach our own child process, and
#: do not verify its (self-signed, test-only) certificate when it serves HTTPS.
_OPENER = urllib.request.build_opener(
    urllib.request.ProxyHandler({}),
    urllib.request.HTTPSHandler(context=ssl._create_unverified_context()),
)


class MockServer:
    """Run ``python -m loadtest mock --port 0 ARGV...`` for the length of a ``with`` block.

    ``argv`` are ``loadtest mock`` options (a later ``--port`` overrides the
    ``0``); or pass ``config=MockConfig(...)`` instead.
    """

    def __init__(
        self,
        argv: Sequence[str] = (),
        *,
        config: MockConfig | None = None,
        startup_timeout: float = 20.0,
        stop_timeout: float = 5.0,
        env: dict[str, str] | None = None,
    ) -> None:
        if config is not None:
            argv = [*config.replace(port=0).to_argv(), *argv]
        self.argv = list(argv)
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._env = env
        self._proc: subprocess.Popen[str] | None = None
        self._lines: collections.deque[str] = collections.deque(maxlen=200)
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None
        self.scheme = "http"
        self.host = ""
        self.port = 0

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> MockServer:
        cmd = [sys.executable, "-m", "loadtest", "mock", "--port", "0", *self.argv]
        env = dict(os.environ if self._env is None else self._env)
        env["PYTHONUNBUFFERED"] = "1"
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env=env,
        )
        # Drain the pipe for the whole life of the process, so it never blocks
        # on a full pipe, and keep the last lines for error messages.
        self._reader = threading.Thread(target=self._read_output, name="mock-output", daemon=True)
        self._reader.start()
        try:
            self._wait_listening()
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout``; returns the exit code."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(self.stop_timeout)
        if self._reader is not None:
            self._reader.join(self.stop_timeout)
        return proc.returncode

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses ----------------------------------------------------------

    @property
    def url(self) -> str:
        """The server's root, e.g. ``http://127.0.0.1:41234``."""
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, e.g. ``http://127.0.0.1:41234/v1``."""
        return self.url + "/v1"

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def output(self) -> list[str]:
        """The last lines the process printed (stdout and stderr)."""
        return list(self._lines)

    # -- metrics ------------------------------------------------------------

    def metrics(self, timeout: float = 5.0) -> dict[str, float]:
        """``GET /metrics``, parsed: one entry per series, keyed exactly as exposed.

        For example ``{'loadtest_mock_requests_total{status="200"}': 3.0,
        'vllm:num_requests_running{model_name="mock-model"}': 0.0,
        'loadtest_mock_steps_total': 48.0, ...}``. Series with no sample yet
        (a status never returned) are absent. See :mod:`loadtest.mock.metrics`.
        """
        return parse_prometheus_text(self._get("/metrics", timeout).decode())

    def requests_by_status(self, timeout: float = 5.0) -> dict[int, int]:
        """``loadtest_mock_requests_total`` as ``{http_status: count}``."""
        prefix = 'loadtest_mock_requests_total{status="'
        return {
            int(series[len(prefix) : -2]): int(value)
            for series, value in self.metrics(timeout).items()
            if series.startswith(prefix)
        }

    def outcomes(self, timeout: float = 5.0) -> dict[str, int]:
        """``loadtest_mock_outcomes_total`` as ``{outcome: count}`` (see :mod:`loadtest.mock.metrics`)."""
        prefix = 'loadtest_mock_outcomes_total{outcome="'
        return {
            series[len(prefix) : -2]: int(value)
            for series, value in self.metrics(timeout).items()
            if series.startswith(prefix)
        }

    # -- internals ----------------------------------------------------------

    def _get(self, path: str, timeout: float) -> bytes:
        with _OPENER.open(self.url + path, timeout=timeout) as resp:
            return resp.read()

    def _read_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.append(line.rstrip("\n"))
            if not self._ready.is_set() and (m := _LISTENING_RE.search(line)):
                host = m.group(2)
                if host in ("0.0.0.0", "[::]", "localhost"):
                    host = "127.0.0.1"
                self.scheme, self.host, self.port = m.group(1), host, int(m.group(3))
                self._ready.set()
        self._ready.set()  # EOF: wake the waiter; it sees the process ended

    def _wait_listening(self) -> None:
        if not self._ready.wait(self.startup_timeout) or not self.port:
            raise RuntimeError(self._failure("did not print its listening line"))

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                if self._get("/health", timeout=1.0) == b"ok":
                    return
            except (urllib.error.URLError, OSError):
                pass
            if self.returncode is not None or time.monotonic() > deadline:
                raise RuntimeError(self._failure("did not answer /health"))
            time.sleep(0.05)

    def _failure(self, what: str) -> str:
        rc = self.returncode
        status = "still running" if rc is None else f"exited with {rc}"
        tail = "\n".join(self.output[-20:])
        return f"loadtest mock {what} ({status}); its output:\n{tail}"
