"""The few places where we reach inside geventhttpclient (pinned to 2.x).

We use its connection pool and its C HTTP parser, but read the socket
ourselves (see :mod:`loadtest.client.reactor`), so we need the response's
socket and pool, and to hand the socket back when the stream is over. These
touch private attributes; they are kept here, in one small module, so an
upgrade that changes them breaks in one place (and ``tests/e2e/test_client.py``).
"""

from __future__ import annotations

from typing import Any

from geventhttpclient._parser import HTTPResponseParser
from geventhttpclient.response import HTTPSocketPoolResponse

#: The C parser's own ``feed``, without ``HTTPResponse.feed``'s wrapper (whose only
#: addition concerns a HEAD response's body; a stream is never one): one Python frame
#: fewer per read on the reactor's hot path.
parser_feed = HTTPResponseParser.feed


def collect_body(response: Any) -> list:
    """From now on, the parser hands each de-chunked body piece to the returned list.

    Why: the parser calls the response's ``_on_body`` once per HTTP chunk, and the
    library's is a Python method that grows a bytearray (which the reader then
    copies out and empties). A list's ``append`` is a C call: no Python frame per
    chunk on the hot path. Bytes the parser buffered before (with the head) are
    moved into the list first, so nothing is lost or reordered.
    """
    early = response.__dict__.get("_early_pieces")
    if early is not None:  # a PiecedResponse: its pieces have gone to a list from the first body byte
        return early
    pieces: list = []
    buffered = response._body_buffer
    if buffered:
        pieces.append(bytes(buffered))
        del buffered[:]
    response._on_body = pieces.append
    return pieces


class PiecedResponse(HTTPSocketPoolResponse):
    """A pooled response whose body pieces go to a list (a C ``append``) from its first byte.

    Why: the library parses the head inside the constructor, and with it every body
    byte that came in the same read; with its Python ``_on_body`` that is one Python
    call per HTTP chunk, which for a burst (a whole answer in the head's read) cost
    more than decoding the chunks. A body that is not an event stream (an error, an
    embeddings answer) is put back where the library reads it with :func:`buffer_body`.
    """

    def __init__(self, sock: Any, pool: Any, **kw: Any) -> None:
        self._early_pieces: list = []
        self._on_body = self._early_pieces.append
        self._head_bytes: list | None = []  # what the parser is fed while the head is read (head_bytes)
        super().__init__(sock, pool, **kw)
        self._reading_head = False

    _reading_head = True  # (a class default: the library feeds the head from inside __init__)

    def feed(self, data: Any) -> None:
        if self._reading_head and self._head_bytes is not None:
            self._head_bytes.append(bytes(data))
        super().feed(data)


def head_bytes(response: Any) -> bytes | None:
    """Every byte the parser was fed with a chunked response's head (the head and the body that came
    with it), once; None for a response that is not chunked or did not keep them.

    Why: the compiled scanner de-frames the usual reads itself, and to know where the framing
    stands it reads it from the head's end (``Scanner.frame`` in ``_scanner.c``).
    """
    raw = response.__dict__.pop("_head_bytes", None)
    if not raw:
        return None
    encoding = response.get("transfer-encoding")
    if not isinstance(encoding, str) or encoding.strip().lower() != "chunked":
        return None
    return b"".join(raw)


def buffer_body(response: Any) -> None:
    """Undo :class:`PiecedResponse`'s list before the library's own ``read`` (no-op for other responses)."""
    early = response.__dict__.pop("_early_pieces", None)
    if early is None:
        return
    del response._on_body  # the class's own method again
    for piece in early:
        response._body_buffer += piece


def detach(response: Any) -> tuple[Any, Any]:
    """Take the socket and pool from a response, so parsing its end cannot touch them.

    (geventhttpclient returns the socket to its pool from inside the parser's
    message-complete callback; that must not happen on the reactor thread.)
    """
    sock, pool = response._sock, response._pool
    response._sock = None
    response._pool = None
    return sock, pool


def give_back(response: Any, sock: Any, pool: Any, reusable: bool) -> None:
    """Return a keep-alive socket to its pool, or close it if the exchange did not end cleanly."""
    if sock is None or pool is None:
        return
    if reusable and response.message_complete and not response.should_close():
        pool.return_socket(sock)
    else:
        pool.release_socket(sock)


def discard(response: Any) -> None:
    """Close a response's socket (if it still holds one): it cannot be reused."""
    sock, pool = detach(response)
    if sock is not None and pool is not None:
        pool.release_socket(sock)


class _ConnectionCounter:
    __slots__ = ("count", "failed")

    def __init__(self) -> None:
        #: connections the pool tried to open
        self.count = 0
        #: the number of the last attempt that raised (0: none): nothing was connected then
        self.failed = 0

    def failed_opening_since(self, before: int) -> bool:
        """Whether an attempt to open a connection, after the first ``before``, raised.

        Why: an error then is a connection that could not be made (``connect``: refused,
        unreachable, a TLS handshake cut); an error on a connection that was made is the
        server closing it before or during its answer (``disconnect``).
        """
        return self.failed > before


def count_new_connections(client: Any) -> _ConnectionCounter:
    """Count the connections the client's pool opens, and the attempts that failed.

    (A request that fails before any response byte may be resent only if it went
    out on a reused keep-alive connection; and whether the error came while opening
    the connection decides its kind.)
    """
    counter = _ConnectionCounter()
    pool = client._connection_pool
    create = pool._create_socket

    def counted(*args: Any, **kwargs: Any) -> Any:
        counter.count += 1
        try:
            return create(*args, **kwargs)
        except BaseException:
            counter.failed = counter.count
            raise

    pool._create_socket = counted
    return counter
