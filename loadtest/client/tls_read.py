"""Reading a TLS event stream on the reader thread, the way plain HTTP is read.

A TLS stream used to be read by its user's greenlet and stamped when the gevent
hub's ``epoll`` returned. At 200 streams in one process that stamp is late by a
whole hub round whenever the hub is busy with the round before it (the
greenlets woken together run one after the other, and so do the sends and the
sweeps), which put HTTPS's p99 gap error at about twice plain HTTP's.

So the reactor thread reads TLS streams too: the connection's own ``SSL``
object (``ssl.SSLSocket._sslobj``, OpenSSL's ``SSL_read`` on the non-blocking
socket underneath, with the GIL released) from the same ``epoll`` batch and
under the same one stamp per ``epoll`` return as a plain stream. The handshake
and the request are still the greenlet's (geventhttpclient's); only the body's
reads move, and the greenlet waits for the reactor exactly as over plain HTTP.
The socket goes back to the keep-alive pool afterwards, its ``SSL`` object in
the state OpenSSL left it.

What plain HTTP has and TLS cannot: the kernel's arrival stamp of the read's
bytes (``SSL_read`` reads the socket itself, without ``recvmsg``'s control
data), so a TLS read's stamp delay is bounded, as a read without kernel stamps
always was, rather than measured. Where the compiled scanner is built, it does
:func:`read_tls`'s loop in C (``Scanner.read``), then the same parse as a plain
read; it asks OpenSSL for more only while OpenSSL or the kernel holds bytes, so
the usual read of one record costs no ``SSLWantReadError``. Without it, this
module's loop reads, and the decrypted bytes go through the decoder's feed.

``LOADTEST_TLS_READS=greenlets`` (read at import) keeps the old greenlet reader,
for comparing the two in one run (``benchmarks/bench_fidelity.py``).
"""

from __future__ import annotations

import os
import ssl
from typing import Any

#: ``greenlets``: TLS streams are read by their users' greenlets, as before (``reactor`` is the default).
ENV = "LOADTEST_TLS_READS"
READS = "greenlets" if os.environ.get(ENV, "").strip().lower() == "greenlets" else "reactor"


def reactor_reads_tls() -> bool:
    """Whether this process's TLS streams are read by the reactor thread (else by greenlets)."""
    return READS == "reactor"


def reactor_sockets(sock: Any) -> tuple[Any, Any] | None:
    """``(raw socket, OpenSSL object or None)`` for the reactor to read ``sock`` with; None if it cannot.

    geventhttpclient's sockets are gevent's: the real, non-blocking socket is
    ``_sock`` and, over TLS, the connection's OpenSSL object ``_sslobj``. A
    standard-library ``SSLSocket`` (a verifying context in a process gevent has
    not patched, as in a test) owns a blocking socket, which would stall the
    reactor thread: it is read in its greenlet instead.
    """
    raw = getattr(sock, "_sock", None)
    if raw is None:
        return None
    return raw, getattr(sock, "_sslobj", None)


def read_tls(tls: Any, size: int) -> tuple[bytes, bool]:
    """Everything decryptable now: ``(bytes, the peer closed)``; BlockingIOError if there is nothing.

    It reads until OpenSSL wants more bytes from the socket, as one ``recv``
    takes all a plain socket holds: every record already in the kernel arrived
    before this batch's stamp. A close without TLS's close_notify (most servers
    just close) is an end of stream like a plain socket's, as the standard
    library's ``suppress_ragged_eofs`` makes it for the greenlet reader; the
    decoder then judges whether the stream was complete.
    """
    parts: list[bytes] = []
    closed = False
    try:
        while True:
            data = tls.read(size)
            if not data:
                closed = True
                break
            parts.append(data)
    except ssl.SSLWantReadError:
        pass
    except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
        closed = True
    if not parts and not closed:
        raise BlockingIOError("no whole TLS record yet")
    return b"".join(parts), closed
