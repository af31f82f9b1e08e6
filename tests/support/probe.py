"""A minimal raw-socket HTTP/SSE client that timestamps every read, for checking the mock.

This is *not* the load-test client (that is :mod:`loadtest.client`): it is a
measuring stick with as little between the socket and the timestamp as
possible (one ``asyncio`` protocol callback per read), used by the mock's
tests and benchmarks to check that chunks leave the mock when the model says.

Each SSE event gets the ``time.perf_counter()`` of the read that completed it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import orjson


@dataclass
class ProbeResult:
    """One request's response, as it arrived."""

    t_start: float
    """``perf_counter()`` just before the request was written."""
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    """The de-chunked body."""
    events: list[tuple[float, bytes]] = field(default_factory=list)
    """(arrival ``perf_counter()``, the ``data:`` payload) of each SSE event."""
    complete: bool = False
    """The body ended as HTTP says it should (last chunk / full length), not by a cut."""
    error: str | None = None

    def json_events(self) -> list[tuple[float, object]]:
        """Events parsed as JSON; ``[DONE]`` and unparsable ones are left out."""
        out = []
        for t, data in self.events:
            try:
                out.append((t, orjson.loads(data)))
            except orjson.JSONDecodeError:
                pass
        return out

    def content_times(self) -> list[float]:
        """Arrival times of the events that carry generated text."""
        times = []
        for t, obj in self.json_events():
            if isinstance(obj, dict) and obj.get("choices"):
                choice = obj["choices"][0]
                text = choice.get("text") or (choice.get("delta") or {}).get("content")
                if text:
                    times.append(t)
        return times

    def gaps_ms(self) -> list[float]:
        """Gaps between consecutive content events, in ms."""
        times = self.content_times()
        return [(b - a) * 1000.0 for a, b in zip(times, times[1:])]


class _Protocol(asyncio.Protocol):
    def __init__(self, result: ProbeResult, done: asyncio.Future[None]) -> None:
        self.r = result
        self.done = done
        self.raw = bytearray()  # bytes not yet consumed by the HTTP parser
        self.head_done = False
        self.chunked = False
        self.length: int | None = None
        self.sse = bytearray()

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.raw += data
        if not self.head_done:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self.raw[:end]).decode("latin-1").split("\r\n")
            del self.raw[: end + 4]
            self.r.status = int(lines[0].split()[1])
            for line in lines[1:]:
                name, _, value = line.partition(":")
                self.r.headers[name.strip().lower()] = value.strip()
            self.chunked = "chunked" in self.r.headers.get("transfer-encoding", "").lower()
            if "content-length" in self.r.headers:
                self.length = int(self.r.headers["content-length"])
            self.head_done = True
        self._body(now)

    def _body(self, now: float) -> None:
        if self.chunked:
            while True:
                eol = self.raw.find(b"\r\n")
                if eol < 0:
                    return
                size = int(bytes(self.raw[:eol]).split(b";")[0], 16)
                if size == 0:
                    if len(self.raw) >= eol + 4:
                        del self.raw[: eol + 4]
                        self._finish(complete=True)
                    return
                if len(self.raw) < eol + 2 + size + 2:
                    return
                self._feed(bytes(self.raw[eol + 2 : eol + 2 + size]), now)
                del self.raw[: eol + 2 + size + 2]
        else:
            chunk = bytes(self.raw)
            self.raw.clear()
            self._feed(chunk, now)
            if self.length is not None and len(self.r.body) >= self.length:
                self._finish(complete=True)

    def _feed(self, data: bytes, now: float) -> None:
        self.r.body += data
        self.sse += data
        while (end := self.sse.find(b"\n\n")) >= 0:
            event = bytes(self.sse[:end])
            del self.sse[: end + 2]
            for line in event.split(b"\n"):
                if line.startswith(b"data:"):
                    self.r.events.append((now, line[5:].strip()))

    def _finish(self, *, complete: bool) -> None:
        self.r.complete = complete
        if not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.head_done and not self.chunked and self.length is None:
            self.r.complete = True  # HTTP/1.0 style: the body ends with the connection
        if exc is not None:
            self.r.error = repr(exc)
        if not self.done.done():
            self.done.set_result(None)


async def probe(
    host: str,
    port: int,
    path: str,
    body: object,
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> ProbeResult:
    """POST ``body`` (JSON) on a fresh connection and record the response as it arrives."""
    loop = asyncio.get_running_loop()
    payload = body if isinstance(body, bytes) else orjson.dumps(body)
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}:{port}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        "Connection: close",
    ]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    request = ("\r\n".join(head) + "\r\n\r\n").encode() + payload
    done: asyncio.Future[None] = loop.create_future()
    result = ProbeResult(t_start=time.perf_counter())
    transport, _ = await asyncio.wait_for(
        loop.create_connection(lambda: _Protocol(result, done), host, port), timeout
    )
    try:
        result.t_start = time.perf_counter()
        transport.write(request)
        try:
            await asyncio.wait_for(done, timeout)
        except asyncio.TimeoutError:
            result.error = "timeout"
    finally:
        transport.close()
    return result
