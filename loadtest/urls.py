"""A path onto a base URL, and a URL's credentials off it: the two places URLs went wrong.

A base URL may carry a query (Azure's ``?api-version=…``, a gateway's ``?api_key=…``), so a
path is not pasted onto the end of the text: that put ``/chat/completions`` inside the
query, in messages and in ``/models`` lookups. :func:`request_url` puts the path after the
base's path and keeps the query after both.

A URL may carry ``user:password@``. httpx and the streaming client send it as HTTP Basic
auth, but urllib takes ``user:password@host`` for the host and hands it, password and all,
to the system resolver (a DNS lookup leaves the machine). :func:`split_userinfo` takes the
credentials off a URL before urllib sees it, for :func:`basic_auth` to send.
"""

from __future__ import annotations

import base64
from typing import Mapping
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit


def request_target(base_url: str, path: str, query: Mapping[str, str] | None = None) -> str:
    """The request line's target: ``base path + path``, then the base's query and ``query``.

    ``request_target("http://h/v1?api-version=1", "/chat/completions", {"a": "b"})`` is
    ``/v1/chat/completions?api-version=1&a=b``.
    """
    parts = urlsplit(base_url)
    params = [p for p in parts.query.split("&") if p] + ([urlencode(dict(query))] if query else [])
    return parts.path.rstrip("/") + path + ("?" + "&".join(params) if params else "")


def request_url(base_url: str, path: str, query: Mapping[str, str] | None = None) -> str:
    """The whole URL a request to ``path`` under ``base_url`` goes to (credentials as given)."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", "")) + request_target(base_url, path, query)


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its ``user:password@``, and the (decoded) user and password, if it had them."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    host = parts.netloc.rsplit("@", 1)[1]
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return bare, (unquote(parts.username or ""), unquote(parts.password or ""))


def basic_auth(user: str, password: str) -> str:
    """The ``Authorization`` header value for HTTP Basic auth (as curl sends a URL's userinfo)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
