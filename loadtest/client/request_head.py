"""Send a streaming request from a prebuilt head: geventhttpclient's ``request`` without its per-call work.

For every call, ``HTTPClient.request`` merges the headers into case-insensitive
``Headers`` objects (twice), checks each name and value against a regular
expression, and builds the head string anew: about 60 µs of CPU per request on
the development machine, the largest per-request cost of a burst stream (0.6 µs
per chunk of a 100-chunk answer). A user sends the same path and headers every
time, with bodies whose length varies, so the head is built once per body length
by the library's own ``_build_request`` (the very bytes it would send) and kept.

Only a plain body takes this way: a header that asks for ``Expect: 100-continue``
or a chunked upload, or an HTTP/1.0 client, keeps the library's ``request``. What
happens on a failed send is the library's too: a reset or broken pipe may come
with the server's early answer (a 413 before the body), which is read and returned;
otherwise the error goes to the caller, whose resend-once rule for a stale pooled
connection (:meth:`loadtest.client.stream.StreamingClient._request`) is unchanged.
"""

from __future__ import annotations

import errno
from typing import Any, Mapping

from geventhttpclient.response import HTTPParseError

from loadtest.client._http import PiecedResponse

#: Distinct body lengths whose head is kept (a workload's prompts have a few hundred at most).
_MAX_HEADS = 512


class PrebuiltRequest:
    """POSTs to one path with one set of headers, each head built once per body length."""

    def __init__(self, http: Any, path: str, headers: Mapping[str, str]) -> None:
        self._http = http
        self._path = path
        self._headers = headers
        self._heads: dict[int, bytes] = {}
        names = {str(k).lower() for k in (*http.default_headers.keys(), *headers.keys())}
        #: False: the library's own ``request`` must send (see the module doc).
        self.usable = http.version == http.HTTP_11 and "expect" not in names and "transfer-encoding" not in names

    def head(self, length: int, body: bytes) -> bytes:
        """The request head for a body of ``length`` bytes, as ``_build_request`` makes it."""
        head = self._heads.get(length)
        if head is None:
            if len(self._heads) >= _MAX_HEADS:
                self._heads.clear()
            built = self._http._build_request("POST", self._path, body=body, headers=self._headers, chunked=False)
            head = self._heads[length] = built.encode("latin-1")
        return head

    def send(self, body: bytes) -> Any:
        """Send ``body`` on a pooled connection; return the response with its head read."""
        http = self._http
        pool = http._connection_pool
        head = self.head(len(body), body)
        sock = pool.get_socket()
        try:
            sock.sendall(head + body)
        except OSError as err:
            if err.errno not in (errno.ECONNRESET, errno.EPIPE):
                pool.release_socket(sock)
                raise
            try:  # the server may have answered early and closed; the response releases the socket either way
                return self._response(sock, pool)
            except (OSError, HTTPParseError):
                raise err from None
        return self._response(sock, pool)

    def _response(self, sock: Any, pool: Any) -> Any:
        http = self._http
        return PiecedResponse(sock, pool, block_size=http.block_size, method="POST", headers_type=http.headers_type)
