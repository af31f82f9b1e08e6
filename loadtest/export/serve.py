"""Serving ``--metrics-port`` without work on the event loop.

The exposition text is rendered where the batches arrive, in the sink's native
thread, right after each batch is bucketed; a scrape, answered on the event loop
(under gevent the HTTP server's thread is a greenlet), only returns those bytes.
Rendering takes a few milliseconds for a run's few hundred series: on the loop
that would be a stall that the chunks' timestamps could feel. Only when no batch
has come for a while (between levels, after the load) does a scrape render the
text itself, under a native lock shared with the sink's thread.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from loadtest.errors import InputError
from loadtest.export.live import LiveMetrics

#: Render on the scrape itself if the text is older than this (no batch since).
MAX_AGE_S = 2.0


def _native_lock():
    try:
        # gevent: only present in the load process, which Locust has patched
        from gevent.monkey import get_original

        return get_original("threading", "Lock")()
    except ImportError:
        return threading.Lock()


class ScrapeText:
    """The latest exposition text of one :class:`LiveMetrics`."""

    def __init__(self, metrics: LiveMetrics) -> None:
        # prometheus_client: only when a live /metrics endpoint is served
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(metrics)
        self._lock = _native_lock()
        self._text = b""
        self._at = float("-inf")

    def refresh(self) -> None:
        # prometheus_client: only when a live /metrics endpoint is served
        from prometheus_client import generate_latest

        with self._lock:
            self._text = generate_latest(self.registry)
            self._at = time.monotonic()

    def current(self) -> bytes:
        if time.monotonic() - self._at > MAX_AGE_S:
            self.refresh()
        return self._text


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:  # a scrape every few seconds is not news
        pass


class MetricsServer:
    """``GET /metrics`` (any path) → the cached text, in Prometheus' text format."""

    def __init__(self, text: ScrapeText, host: str, port: int) -> None:
        # prometheus_client: only when a live /metrics endpoint is served
        from prometheus_client import CONTENT_TYPE_LATEST

        def app(environ, start_response):
            body = text.current()
            start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))])
            return [body]

        self._server: WSGIServer = make_server(host, port, app, handler_class=_Quiet)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class LiveExport:
    """What a run holds while ``--metrics-port`` is set: the collector, its text and its server."""

    def __init__(self, scenario: str, host: str, port: int) -> None:
        self.metrics = LiveMetrics(scenario)
        self.text = ScrapeText(self.metrics)
        try:
            self.server = MetricsServer(self.text, host, port)
        except OSError as err:
            raise InputError(f"--metrics-port {port}: cannot listen on {host}:{port}: {err.strerror or err}") from None

    def attach(self, sink: Any) -> None:
        """Bucket every batch the sink stores and render the text, in the sink's thread."""

        def observe(table, window_ends=None) -> None:
            self.metrics.observe(table, window_ends)
            self.text.refresh()

        def take(observed) -> None:  # bucketed by the record writer process (loadtest.load.sink_worker)
            self.metrics.take(observed)
            self.text.refresh()

        sink.observers.append(observe)
        sink.watchers.append(take)

    def close(self) -> None:
        self.server.close()
