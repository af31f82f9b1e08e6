"""``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY``: which proxy a target goes through.

A corporate network often reaches a hosted API only through a proxy, and a
client that silently ignores the proxy variables fails with a confusing
connect error. geventhttpclient speaks to plain ``http://`` proxies (absolute-form
requests for http targets, a ``CONNECT`` tunnel for https ones), so those are
honoured, with ``NO_PROXY`` (and its lower-case spellings) as the standard
library reads them. Any other kind (``socks5://``, ``https://`` proxies) is
refused with one line rather than bypassed.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit


class ProxyError(ValueError):
    """A proxy variable we cannot honour (the message names it)."""


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    user: str | None = None
    password: str | None = None
    #: The variable it came from, for messages (never its value: it may hold a password).
    source: str = ""

    def client_options(self) -> dict:
        """Keyword arguments for geventhttpclient's ``HTTPClient``."""
        return {"proxy_host": self.host, "proxy_port": self.port,
                "proxy_user": self.user, "proxy_password": self.password}


def proxy_for(url: str) -> Proxy | None:
    """The proxy the environment asks ``url`` to go through, or None (no proxy or NO_PROXY)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    raw = proxies.get(parts.scheme)
    if not raw:
        return None
    host = parts.hostname or ""
    if urllib.request.proxy_bypass_environment(host, proxies):
        return None
    variable = f"{parts.scheme.upper()}_PROXY"
    proxy = urlsplit(raw if "://" in raw else "http://" + raw)
    if proxy.scheme != "http":
        raise ProxyError(f"${variable}: a {proxy.scheme}:// proxy is not supported (only http:// proxies); "
                         f"unset it or add {host} to $NO_PROXY")
    if not proxy.hostname:
        raise ProxyError(f"${variable}: no proxy host in it")
    try:
        port = proxy.port or 80
    except ValueError:
        raise ProxyError(f"${variable}: the port is not a number") from None
    return Proxy(proxy.hostname, port,
                 unquote(proxy.username) if proxy.username else None,
                 unquote(proxy.password) if proxy.password else None,
                 source=variable)
