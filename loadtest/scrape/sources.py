"""Where the server's metrics come from: one URL, one URL per replica, or a Prometheus server.

A replica's id is what a reader recognises it by: the ``host:port`` of its metrics
URL (the path only when two URLs share a host and port), or its pod/instance label
in Prometheus. The single default URL has the empty id: it is whatever answers there.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from loadtest.redact import public_url


def replica_ids(urls: list[str]) -> list[str]:
    """One readable, unique id per URL of ``target.metrics.urls``."""
    netlocs = [urlsplit(u).netloc.rsplit("@", 1)[-1] for u in urls]
    if len(set(netlocs)) == len(netlocs):
        return netlocs
    return [public_url(u) for u in urls]


def scrape_targets(url: str, urls: list[str]) -> list[tuple[str, str]]:
    """(replica id, URL) pairs to scrape each round: every replica's URL, or the single one with id ''."""
    if urls:
        return list(zip(replica_ids(urls), urls))
    return [("", url)]
