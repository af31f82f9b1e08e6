"""Send one streaming request and time every SSE chunk as its bytes arrive.

The request and the response head go through geventhttpclient (the library
under Locust's FastHttpUser: a C HTTP parser on gevent sockets, with a
keep-alive pool). The body of an event stream, plain HTTP or TLS, is then read
by the process's :mod:`~loadtest.client.reactor` thread, which stamps
``perf_counter()`` the moment each ``epoll`` returns. With
``LOADTEST_TLS_READS=greenlets`` a TLS stream is read by the user's own greenlet
instead, the same way (recv, stamp, let the C parser strip the chunked framing,
decode), stamped when the hub's ``epoll`` returned (:mod:`~loadtest.client.hub_clock`).
Either way every event completed by one read gets that read's time, which is
when its bytes reached us, and is decoded by the same
:class:`~loadtest.client.decode.StreamDecoder`.

Keep-alive: a server may close an idle or used-up connection (llama-server
closes each after 100 requests) just as we send on it. Like every standard
HTTP client, a request whose *reused* connection turns out closed before any
response byte is sent again, once, on a fresh connection; the record counts it
(``resends``) and it is not a failure. A fresh connection that is refused or
reset is the server's failure, as before.

The kind says what happened: ``connect`` when the connection could not be made
(refused, unreachable, no answer within the connect timeout, a TLS handshake cut),
``disconnect`` when a connection that was made (or reused) was closed before or
during the answer; the error text says which of the two ("before any response
byte").
"""

from __future__ import annotations

import errno
import functools
import socket
import ssl
import time
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

import gevent
import gevent.ssl
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from loadtest.client import _http
from loadtest.client.decode import StreamDecoder
from loadtest.client.hub_clock import ReadTimer, hub_clock, sweep_now
from loadtest.client.proxy import proxy_for
from loadtest.client.reactor import reactor
from loadtest.client.record import RequestRecord
from loadtest.client.request_head import PrebuiltRequest
from loadtest.client.tls_read import reactor_reads_tls, reactor_sockets
from loadtest.client.unary import UNARY_APIS, send_unary
from loadtest.client.wire import PATHS, Api, error_message
from loadtest.urls import basic_auth, request_target

_READ_SIZE = 65536
_MAX_ERROR_BODY = 64 * 1024
#: An embeddings answer: a batch of float vectors (256 × 4096 floats as JSON is about 20 MB).
_MAX_UNARY_BODY = 256 * 1024 * 1024


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
        query: Mapping[str, str] | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        insecure: bool = False,
        ca_bundle: str | None = None,
        use_reactor: bool = True,
    ) -> None:
        url = urlsplit(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.api = api
        # The base URL's own query (``?api-version=…``) and target.query both go on every request, after the path.
        self.path = request_target(base_url, PATHS[api], query)
        self.timeout_s = timeout_s
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json" if api in UNARY_APIS else "text/event-stream",
            "Accept-Encoding": "identity",
            **(headers or {}),
        }
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        elif url.username is not None:  # https://user:password@host/v1: HTTP Basic, as curl does
            self.headers["Authorization"] = basic_auth(unquote(url.username), unquote(url.password or ""))
        # TLS streams too are read by the reactor thread, unless LOADTEST_TLS_READS=greenlets (tls_read.py).
        self.use_reactor = use_reactor and (url.scheme == "http" or reactor_reads_tls())
        proxy = proxy_for(base_url)
        self._http = HTTPClient(
            url.hostname,
            port=url.port,
            ssl=url.scheme == "https",
            insecure=insecure,
            ssl_options={"ca_certs": ca_bundle} if ca_bundle else None,
            ssl_context_factory=functools.partial(shared_tls_context, insecure),
            connection_timeout=connect_timeout_s,
            # The whole request is bounded by a gevent.Timeout in send(); a per-read
            # socket timeout would only add a timer start and stop to every chunk. TLS keeps
            # it: a socket the reactor cannot take is read in its greenlet (tls_read.reactor_sockets).
            network_timeout=None if self.use_reactor and url.scheme == "http" else timeout_s,
            concurrency=1,
            block_size=_READ_SIZE,
            **(proxy.client_options() if proxy else {}),
        )
        self._http.default_headers["User-Agent"] = "loadtest"
        self._prebuilt = PrebuiltRequest(self._http, self.path, self.headers)
        self._connections = _http.count_new_connections(self._http)
        #: The record of the request being sent; the caller records it if the
        #: greenlet is killed mid-request (it is then marked ``cancelled``).
        self.in_flight: RequestRecord | None = None

    def close(self) -> None:
        self._http.close()

    def send(self, body: bytes, capture_text: bool = False) -> RequestRecord:
        """Send one streaming request; return its record whatever happens."""
        if not self.use_reactor:
            sweep_now()  # the previous request's end and this one's start ran without a read
        rec = self.in_flight = RequestRecord(start_wall=time.time(), start_perf=time.perf_counter())
        response = None
        opened_before = self._connections.count  # an error while opening a connection is ``connect``
        try:
            with gevent.Timeout(self.timeout_s, _RequestTimeout):
                response = self._request(rec, body)
                head_at = time.perf_counter()
                rec.ttfb_ms = (head_at - rec.start_perf) * 1000.0
                rec.status = response.status_code
                streamed = rec.status == 200 and self.api not in UNARY_APIS
                if not streamed or "text/event-stream" not in (response.get("content-type") or ""):
                    _http.buffer_body(response)  # the library reads this body itself
                if rec.status != 200:
                    _record_http_error(rec, response)
                elif self.api in UNARY_APIS:
                    send_unary(rec, response, body, _MAX_UNARY_BODY, self.api)
                elif "text/event-stream" not in (response.get("content-type") or ""):
                    rec.fail("malformed", f"server did not stream: Content-Type is {response.get('content-type')!r}")
                else:
                    self._read_stream(rec, response, head_at, capture_text)
                    response = None  # the socket was handed back by _read_stream
        except _RequestTimeout:
            rec.fail("timeout", f"no complete response within {self.timeout_s:g} s")
        except gevent.GreenletExit:
            rec.fail("cancelled", "the run stopped while the request was in flight")
            _end(rec, response)
            raise
        except (ConnectionRefusedError, socket.gaierror) as err:
            rec.fail("connect", f"cannot connect: {err}")
        except (socket.timeout, TimeoutError) as err:
            if self._connections.failed_opening_since(opened_before):
                rec.fail("connect", f"cannot connect: socket timeout: {err}")
            else:
                rec.fail("timeout", f"socket timeout: {err}")
        except ssl.SSLError as err:
            if self._connections.failed_opening_since(opened_before):
                rec.fail("connect", f"TLS error: {err}")
            else:
                rec.fail("disconnect", _closed(response, err, "TLS error: "))
        except (HTTPConnectionClosed, HTTPParseError, ConnectionError, OSError) as err:
            if getattr(err, "errno", None) in (errno.EMFILE, errno.ENFILE):
                # Our process (or host) ran out of descriptors: the client's failure, not the server's.
                rec.fail("client_error", f"the load generator is out of file descriptors ({err}); raise ulimit -n")
            elif self._connections.failed_opening_since(opened_before):
                rec.fail("connect", f"cannot connect: {type(err).__name__}: {err}")
            else:  # the connection was made (or reused) and then closed: the server's (or a proxy's) cut
                rec.fail("disconnect", _closed(response, err))
        except Exception as err:  # a bug (ours or a library's) costs this request, never the run
            rec.fail("client_error", f"{type(err).__name__}: {err}")
        _end(rec, response)
        self.in_flight = None
        return rec

    def _request(self, rec: RequestRecord, body: bytes) -> Any:
        """Send and read the response head; resend once if a reused connection was stale."""
        fresh_before = self._connections.count
        send = self._prebuilt.send if self._prebuilt.usable else self._send_with_library
        try:
            return send(body)
        except (HTTPConnectionClosed, ConnectionResetError, BrokenPipeError):
            if self._connections.count != fresh_before:
                raise  # it was a fresh connection: the server's failure
        # The pooled connection was closed under us before any response byte:
        # nothing reached the application, so sending again is safe (RFC 9112 9.3.1).
        rec.resends += 1
        return send(body)

    def _send_with_library(self, body: bytes) -> Any:
        return self._http.request("POST", self.path, body=body, headers=self.headers)

    def _read_stream(self, rec: RequestRecord, response: Any, head_at: float, capture_text: bool = False) -> None:
        """Read the event stream to its end, then give the socket back (or close it)."""
        decoder = StreamDecoder(rec, self.api, capture_text)
        sock, pool = _http.detach(response)
        clean = False
        try:
            sockets = reactor_sockets(sock) if self.use_reactor and sock is not None else None
            if sockets is not None:
                clean = reactor().read(sockets[0], response, decoder, head_at, tls=sockets[1])
            else:
                clean = _read_in_greenlet(sock, response, decoder, head_at)
        finally:
            if not clean and rec.ok:  # interrupted from outside (timeout, cancel): stamp the end here
                rec.e2e_ms = (time.perf_counter() - rec.start_perf) * 1000.0
            _http.give_back(response, sock, pool, reusable=clean and rec.ok)


@functools.lru_cache(maxsize=None)
def shared_tls_context(insecure: bool, cafile: str | None = None) -> Any:
    """One TLS context per process and setting, shared by every user's connections.

    Why shared: building a verifying context loads the system's CA store, about
    15 ms of CPU that holds the interpreter. One context per user meant 100
    users starting a level over HTTPS froze the event loop for 1.5 s, delaying
    every greenlet's chunk stamps and filling the self-check's delay figures
    with stalls that had nothing to do with the load. A context is safe to share:
    each connection gets its own ``SSLSocket``. ``insecure``
    (``target.verify_tls: false``) accepts any certificate and loads no CA store.
    """
    if insecure:
        context = gevent.ssl.SSLContext(gevent.ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = gevent.ssl.CERT_NONE
        return context
    return gevent.ssl.create_default_context(cafile=cafile)


def client_for(target: Any, api_key: str | None) -> StreamingClient:
    """A client configured from a scenario's ``target`` section."""
    return StreamingClient(
        target.base_url,
        target.api,
        headers=target.resolved_headers(),
        query=target.query,
        api_key=api_key,
        timeout_s=target.timeout_s,
        insecure=not target.verify_tls,
        ca_bundle=target.ca_bundle,
    )


def _read_in_greenlet(sock: Any, response: Any, decoder: StreamDecoder, head_at: float) -> bool:
    """The TLS reader: recv in this greenlet, stamp (when the hub's poll returned, if it waited), decode."""
    pieces = _http.collect_body(response)
    timer = ReadTimer(hub_clock(), sock.fileno(), head_at) if sock is not None else None
    chunks = decoder.rec.chunk_ms
    now = head_at
    try:
        while True:
            if pieces:
                chunk = b"".join(pieces)
                pieces.clear()
                before = len(chunks)
                fed = decoder.feed(chunk, now)
                if timer is not None:
                    timer.settle(len(chunks) > before)
                if not fed:
                    break
            if response.message_complete or timer is None:
                break
            rounds = timer.before_recv()
            data = sock.recv(_READ_SIZE)
            now = timer.stamp(rounds)
            if not data:
                break
            response.feed(data)
    finally:
        if timer is not None:
            timer.close()
    decoder.close(now)
    return True


def _end(rec: RequestRecord, response: Any) -> None:
    """Stamp the end if nobody did, and close a socket that an error left open."""
    if rec.e2e_ms != rec.e2e_ms:  # NaN: not stamped yet
        rec.e2e_ms = (time.perf_counter() - rec.start_perf) * 1000.0
    if response is not None:
        if rec.ok and response.message_complete:
            response.release()
        else:
            _http.discard(response)


def _closed(response: Any, err: BaseException, what: str = "") -> str:
    """A ``disconnect``'s words: before the response head, or after it.

    Why the distinction is spelled out: "HTTPConnectionClosed: connection closed." beside a
    request that never got a byte read like a refused connection to a trial; it is a
    connection that was made (a fresh one the dying server had accepted, or a resend's)
    and then closed unanswered.
    """
    cause = f"{what}{type(err).__name__}: {err}"
    if response is None:
        return f"the connection was closed before any response byte ({cause})"
    return cause


def _record_http_error(rec: RequestRecord, response: Any) -> None:
    body = b""
    try:
        body = response.read(_MAX_ERROR_BODY)
    except Exception:  # the error is the status; a broken body must not hide it
        pass
    message = f"HTTP {rec.status}: {error_message(body)}"
    status = rec.status
    if status == 429:
        retry = response.get("retry-after")
        rec.fail("rate_limited", message + (f" (Retry-After: {retry})" if retry else ""))
        rec.retry_after_s = _seconds(retry)
    elif 300 <= status < 400:
        location = response.get("location")
        rec.fail("http_3xx", f"HTTP {status}: redirected to {location or '(no Location header)'} (not followed)")
    elif 400 <= status < 500:
        rec.fail("http_4xx", message)
    elif status >= 500:
        rec.fail("http_5xx", message)
    else:  # 1xx final or a 2xx other than 200 (204, 202 …): no stream to measure
        rec.fail("malformed", f"HTTP {status} instead of 200 with an event stream: {error_message(body)}")


def _seconds(retry_after: str | None) -> float | None:
    """Retry-After in seconds (an HTTP date, or garbage, falls back to our own back-off)."""
    try:
        value = float(retry_after) if retry_after else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 else None
