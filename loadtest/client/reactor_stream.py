"""The reactor's record of one response it reads (:mod:`loadtest.client.reactor`)."""

from __future__ import annotations

from typing import Any

import gevent.event

from loadtest.client.decode import StreamDecoder


class ReactorStream:
    """One response being read by the reactor: its socket, its decoder and what the read has reached.

    A plain slotted object: the reactor touches it at every read, and the compiled scanner
    (``_scanner.c``'s ``run_turns``) takes its ``scanner`` by that name.
    """

    __slots__ = (
        "raw", "fd", "response", "decoder", "chunks", "pieces", "first_at", "event", "cancelled", "registered",
        "ended", "rx_stamps", "feed", "scanner", "tls",
    )

    def __init__(self, raw: Any, response: Any, decoder: StreamDecoder, first_at: float, tls: Any = None) -> None:
        self.raw = raw                      # the real, non-blocking socket under gevent's wrapper
        self.fd = raw.fileno()
        self.response = response
        self.decoder = decoder
        self.chunks = decoder.rec.chunk_ms  # the content chunks' stamps: how many a read added
        self.pieces: list = []              # body pieces the parser handed over (see _http.collect_body)
        self.first_at = first_at            # when the bytes read with the head arrived
        self.event = gevent.event.Event()   # set (on the hub) when the reactor is done with it
        self.cancelled = False
        self.registered = False
        self.ended = False                  # the stream finished (cleanly or not) in the reactor
        self.rx_stamps = False              # the kernel stamps its bytes' arrival (Linux)
        self.feed = decoder.reader()        # the decoder's feed, or the compiled scanner's (scanner.py)
        self.scanner: Any = None            # the compiled scanner, once attached: it does the whole read
        self.tls = tls                      # the connection's OpenSSL object over TLS (tls_read.py), else None
