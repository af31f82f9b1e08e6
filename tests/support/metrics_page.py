"""A Prometheus /metrics page served on 127.0.0.1 by a thread of this process (tests and benchmarks).

For what the mock does not offer: a page of a chosen size, or one that answers late.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve_metrics_page(page: bytes, delay_s: float = 0.0) -> ThreadingHTTPServer:
    """Serve ``page`` at every path, ``delay_s`` after each request came; ``shutdown()`` it after."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if delay_s:
                time.sleep(delay_s)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
