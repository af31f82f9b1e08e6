"""Send one streaming request and time every SSE chunk as its bytes arrive.

The transport is geventhttpclient (the library under Locust's FastHttpUser):
a C HTTP parser on gevent sockets, cheap enough for thousands of chunks per
second in one process. We do not use its line iterator: we ``recv`` from the
socket ourselves, stamp ``perf_counter()`` the moment ``recv`` returns, let the
C parser strip the chunked transfer framing, and hand the body bytes to our own
:class:`~loadtest.client.sse.SSEParser`. Every event completed by one read gets
that read's time, which is when its bytes reached us.

The hot path per chunk is: one dict lookup chain on an orjson-decoded object and
two ``array.append`` calls.
"""

from __future__ import annotations

import socket
import ssl
import time
from typing import Mapping
from urllib.parse import urlsplit

import gevent
import orjson
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from loadtest.client.record import RequestRecord
from loadtest.client.sse import SSEParser
from loadtest.client.wire import PATHS, Api, error_message, read_chunk

_READ_SIZE = 65536
_MAX_ERROR_BODY = 64 * 1024


class _RequestTimeout(Exception):
    """Raised by gevent.Timeout when a request outlives ``timeout_s``."""


class StreamingClient:
    """A keep-alive connection to one OpenAI-compatible endpoint, used by one user.

    ``send`` never raises for a server or network problem: every outcome becomes
    a :class:`RequestRecord`, failures included, so nothing is silently dropped.
    """

    def __init__(
        self,
        base_url: str,
        api: Api,
        *,
        headers: Mapping[str, str] | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        insecure: bool = False,
    ) -> None:
        url = urlsplit(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.api = api
        self.path = (url.path or "") + PATHS[api]
        self.timeout_s = timeout_s
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
            **(headers or {}),
        }
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._http = HTTPClient(
            url.hostname,
            port=url.port,
            ssl=url.scheme == "https",
            insecure=insecure,
            connection_timeout=connect_timeout_s,
            network_timeout=timeout_s,
            concurrency=1,
            block_size=_READ_SIZE,
        )
        #: The record of the request being sent; the caller records it if the
        #: greenlet is killed mid-request (it is then marked ``cancelled``).
        self.in_flight: RequestRecord | None = None
        # geventhttpclient 2.x sends "Connection: keep-alive" and its user agent by default.
        self._http.default_headers["User-Agent"] = "loadtest"

    def close(self) -> None:
        self._http.close()

    def send(self, body: bytes) -> RequestRecord:
        """Send one streaming request; return its record whatever happens."""
        rec = self.in_flight = RequestRecord(start_wall=time.time(), start_perf=time.perf_counter())
        response = None
        try:
            with gevent.Timeout(self.timeout_s, _RequestTimeout):
                response = self._http.request("POST", self.path, body=body, headers=self.headers)
                rec.ttfb_ms = (time.perf_counter() - rec.start_perf) * 1000.0
                rec.status = response.status_code
                if rec.status != 200:
                    _record_http_error(rec, response)
                elif not _is_event_stream(response):
                    rec.fail("malformed", f"server did not stream: Content-Type is {response.get('content-type')!r}")
                else:
                    _read_stream(rec, response, self.api)
        except _RequestTimeout:
            rec.fail("timeout", f"no complete response within {self.timeout_s:g} s")
        except gevent.GreenletExit:
            rec.fail("cancelled", "the run stopped while the request was in flight")
            _finish(rec, response, ok=False)
            raise
        except (ConnectionRefusedError, socket.gaierror) as err:
            rec.fail("connect", f"cannot connect: {err}")
        except (socket.timeout, TimeoutError) as err:
            kind = "timeout" if response is not None else "connect"
            rec.fail(kind, f"socket timeout: {err}")
        except ssl.SSLError as err:
            rec.fail("connect", f"TLS error: {err}")
        except (HTTPConnectionClosed, HTTPParseError, ConnectionError, OSError) as err:
            kind = "disconnect" if response is not None else "connect"
            rec.fail(kind, f"{type(err).__name__}: {err}")
        _finish(rec, response, ok=rec.ok)
        self.in_flight = None
        return rec


def _is_event_stream(response) -> bool:
    return "text/event-stream" in (response.get("content-type") or "")


def _finish(rec: RequestRecord, response, ok: bool) -> None:
    """Stamp the end, and give the socket back only if the exchange ended cleanly."""
    if rec.e2e_ms != rec.e2e_ms:  # NaN: not stamped yet
        rec.e2e_ms = (time.perf_counter() - rec.start_perf) * 1000.0
    if response is None:
        return
    if ok and response.message_complete:
        response.release()
    else:
        _discard(response)


def _discard(response) -> None:
    """Close a connection whose stream did not end cleanly (it cannot be reused)."""
    pool, sock = getattr(response, "_pool", None), getattr(response, "_sock", None)
    response._sock = None
    response._pool = None
    if pool is not None and sock is not None:
        pool.release_socket(sock)


def _record_http_error(rec: RequestRecord, response) -> None:
    body = b""
    try:
        body = response.read(_MAX_ERROR_BODY)
    except Exception:  # the error is the status; a broken body must not hide it
        pass
    message = f"HTTP {rec.status}: {error_message(body)}"
    if rec.status == 429:
        retry = response.get("retry-after")
        rec.fail("rate_limited", message + (f" (Retry-After: {retry})" if retry else ""))
        try:
            rec.retry_after_s = float(retry) if retry else None
        except ValueError:  # an HTTP date: fall back to our own back-off
            rec.retry_after_s = None
    elif 400 <= rec.status < 500:
        rec.fail("http_4xx", message)
    else:
        rec.fail("http_5xx", message)


def _read_stream(rec: RequestRecord, response, api: Api) -> None:
    """Read SSE events until ``[DONE]`` and the end of the HTTP message."""
    parser = SSEParser()
    start = rec.start_perf
    chunk_ms = rec.chunk_ms
    chunk_tokens = rec.chunk_tokens
    loads = orjson.loads
    continuous = False
    last_completion = 0
    final_completion: int | None = None
    done = finished = False

    body = response._body_buffer  # bytes the C parser already de-chunked
    sock = response._sock
    now = time.perf_counter()
    while True:
        if body:
            data = bytes(body)
            del body[:]
            for payload in parser.feed(data):
                if payload == b"[DONE]":
                    done = True
                    continue
                try:
                    obj = loads(payload)
                except orjson.JSONDecodeError:
                    rec.fail("malformed", f"chunk is not JSON: {payload[:120]!r}")
                    return
                facts = read_chunk(obj, api)
                if facts.error is not None:
                    rec.fail("stream_error", f"error in stream: {facts.error}")
                    return
                if facts.usage_completion is not None:
                    if facts.usage_prompt is not None:
                        rec.prompt_tokens = facts.usage_prompt
                    if facts.final_usage:
                        final_completion = facts.usage_completion
                    else:
                        continuous = True
                if facts.content:
                    t = (now - start) * 1000.0
                    if not chunk_ms:
                        rec.ttft_ms = t
                    chunk_ms.append(t)
                    if "mock_sent" in obj:
                        rec.chunk_sent_ms.append((obj["mock_sent"] - start) * 1000.0)
                    if continuous:
                        chunk_tokens.append(max(facts.usage_completion - last_completion, 1))
                    else:
                        chunk_tokens.append(1)
                if continuous and facts.usage_completion is not None:
                    last_completion = facts.usage_completion
                finished = finished or facts.finished
        if response.message_complete or sock is None:
            break
        data = sock.recv(_READ_SIZE)
        now = time.perf_counter()
        if not data:
            break
        response.feed(data)
    rec.e2e_ms = (now - start) * 1000.0
    if not (done or finished):
        rec.fail("disconnect", f"stream ended before [DONE] after {len(chunk_ms)} content chunks")
    _settle_tokens(rec, continuous, last_completion, final_completion)


def _settle_tokens(rec: RequestRecord, continuous: bool, last: int, final: int | None) -> None:
    """Decide the completion token count and say where it came from.

    Continuous usage gives exact per-chunk counts. A final usage chunk gives an
    exact total; when it differs from the chunk count (several tokens per chunk),
    the total is spread evenly over the chunks. Without usage, one token per
    content chunk is the only estimate.
    """
    n = len(rec.chunk_ms)
    if continuous:
        rec.token_source = "continuous_usage"
        rec.completion_tokens = final if final is not None else last
    elif final is not None:
        rec.token_source = "usage"
        rec.completion_tokens = final
        if n and final != n and final >= n:
            base, extra = divmod(final, n)
            for i in range(n):
                rec.chunk_tokens[i] = base + (1 if i < extra else 0)
    else:
        rec.token_source = "chunks"
        rec.completion_tokens = n
