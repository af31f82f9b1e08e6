"""A tiny HTTP/1.1 server that replays recorded-style responses, byte for byte, at a set pace.

Each fixture is served under its own path prefix (``/zoo/<name>/v1``), so one
server replays the whole zoo. Every write is stamped with ``perf_counter()``
just before it goes out (the client in the same process uses the same clock),
so a test can assert when each content chunk must have arrived.

It is deliberately not aiohttp or the mock: it writes exactly the bytes a
fixture holds (chunked, close-delimited or Content-Length framing), can stall
between them, and can imitate a keep-alive connection that the server closes
just as the client reuses it (``close_after``).
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from support.wirezoo.fixtures import Fixture


@dataclass
class Exchange:
    """One request the server received and what it did."""

    fixture: str
    path: str
    headers: dict[str, str]
    body: bytes
    #: perf_counter() just before each write of the fixture went out.
    sent_at: list[float] = field(default_factory=list)
    answered: bool = True


class ReplayServer:
    """Serve ``fixtures`` on 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        fixtures: list[Fixture],
        close_after: int | None = None,
        rotate: dict[str, list[str]] | None = None,
        choose: "Callable[[Exchange], str | None] | None" = None,
    ) -> None:
        self.fixtures = {f.name: f for f in fixtures}
        #: A path name served by several fixtures in turn (e.g. two good streams, then an error).
        self.rotate = rotate or {}
        self._turns: dict[str, int] = {}
        #: Pick the fixture from the request itself (e.g. reject a body field); None: by path.
        self.choose = choose
        self._lock = threading.Lock()
        #: Close a connection, without answering, on the request after this many answers.
        self.close_after = close_after
        self.exchanges: list[Exchange] = []
        self.connections = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._stop = False

    def base_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/zoo/{name}/v1"

    def __enter__(self) -> "ReplayServer":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(30)
        buf = b""
        answered = 0
        with conn:
            while True:
                request, buf = _read_request(conn, buf)
                if request is None:
                    return
                path, headers, body = request
                name = path.split("/")[2] if path.startswith("/zoo/") else ""
                exchange = Exchange(name, path, headers, body)
                self.exchanges.append(exchange)
                if self.close_after is not None and answered >= self.close_after:
                    exchange.answered = False  # the keep-alive race: closed before any byte
                    return
                chosen = self.choose(exchange) if self.choose else None
                fixture = self.fixtures.get(chosen or self._turn(name))
                if fixture is None:
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    answered += 1
                    continue
                try:
                    keep = self._respond(conn, fixture, exchange)
                except OSError:  # the client stopped reading (an error or abort it recognised)
                    return
                answered += 1
                if not keep:
                    return

    def _turn(self, name: str) -> str:
        if name not in self.rotate:
            return name
        with self._lock:
            turn = self._turns.get(name, 0)
            self._turns[name] = turn + 1
        names = self.rotate[name]
        return names[turn % len(names)]

    def _respond(self, conn: socket.socket, fixture: Fixture, exchange: Exchange) -> bool:
        """Write the fixture's response; True if the connection may be reused."""
        head = [f"HTTP/1.1 {fixture.status} {fixture.reason}"]
        head += [f"{k}: {v}" for k, v in fixture.headers.items()]
        writes = [_echo(w, exchange.headers) for w in fixture.writes]
        if fixture.framing == "chunked":
            head.append("Transfer-Encoding: chunked")
        elif fixture.framing == "length":
            head.append(f"Content-Length: {sum(len(w) for w in writes)}")
        else:
            head.append("Connection: close")
        conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        for i, data in enumerate(writes):
            if i and fixture.pace_ms:
                time.sleep(fixture.pace_ms / 1000.0)
            exchange.sent_at.append(time.perf_counter())
            if fixture.framing == "chunked":
                conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))
            else:
                conn.sendall(data)
        if fixture.framing == "chunked":
            if fixture.cut:
                return False  # the stream is cut: no terminating chunk
            conn.sendall(b"0\r\n\r\n")
            return True
        return fixture.framing == "length"


def _echo(data: bytes, headers: dict[str, str]) -> bytes:
    """Replace ``{echo:<header>}`` with the request's header value (servers echo keys in errors)."""
    while b"{echo:" in data:
        start = data.index(b"{echo:")
        end = data.index(b"}", start)
        name = data[start + 6:end].decode().lower()
        data = data[:start] + headers.get(name, "").encode() + data[end + 1:]
    return data


def _read_request(conn: socket.socket, buf: bytes):
    """(path, headers, body) of the next request on ``conn``, or None at its end."""
    while b"\r\n\r\n" not in buf:
        try:
            data = conn.recv(65536)
        except OSError:
            return None, b""
        if not data:
            return None, b""
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    path = lines[0].split(" ")[1]
    if path.startswith("http://"):  # absolute form: we were sent the request as a proxy
        path = "/" + path.split("/", 3)[3]
        lines.append(f"x-absolute-form: {lines[0].split(' ')[1]}")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None, b""
        rest += data
    return (path, headers, rest[:length]), rest[length:]
