"""A TCP forwarder on 127.0.0.1, as ``ssh -L`` or socat: every connection it accepts is piped to a target.

When the target is gone, it still accepts each connection and closes it unanswered (``ssh -L``
logs "connect failed: Connection refused" and closes the channel). That is what a load generator
sees of a dead server behind a tunnel or a TCP proxy: connections made, then closed before any
response byte.
"""

from __future__ import annotations

import socket
import threading


class Tunnel:
    """Forward 127.0.0.1:``port`` to ``target_port``; use as a context manager."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        #: connections accepted, and those closed unanswered because the target refused
        self.accepted = 0
        self.closed_unanswered = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]

    def base_url(self, path: str = "/v1") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> "Tunnel":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                self.closed_unanswered += 1
                conn.close()
                continue
            upstream.settimeout(None)
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()


def pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until either ends, then shut both down (one thread per direction; the
    tunnel here and the CONNECT proxy of tests/e2e/test_tls.py both forward with it)."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        src.close()  # each direction's thread closes the socket it read
