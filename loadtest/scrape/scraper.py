"""One scrape of a Prometheus endpoint, and the loop that repeats it at a fixed interval.

Parsing is prometheus_client's text parser (the reference implementation's
Python twin), never a hand-written one: label escaping, comments, timestamps
and histogram series are its problem. A body it rejects (an HTML error page,
JSON, a login form) is a failed scrape of kind ``not_prometheus``.

A failure never stops the loop: the endpoint may come back, and a run must go
on whatever its metrics endpoint does. Each kind of failure is reported once
(``on_new_failure``), then only counted in the ``up`` series.
"""

from __future__ import annotations

import json
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Sequence

import httpx
from prometheus_client.parser import text_string_to_metric_families

from loadtest.scrape.store import SCRAPE_DURATION, SCRAPE_SAMPLES, UP, SampleWriter

#: Rows are flushed to disk at least this often (the same promise as requests.parquet).
FLUSH_EVERY_S = 1.0


@dataclass
class ScrapeResult:
    wall: float  # midpoint of the scrape, time.time() seconds
    duration_s: float
    rows: list[tuple[str, str, float, str]] = field(default_factory=list)  # metric, labels, value, type
    failure: str | None = None  # kind: http_404, not_prometheus, connect, timeout, empty, ...
    message: str | None = None  # one human line when it failed


def labels_json(labels: dict[str, str]) -> str:
    return json.dumps(labels, sort_keys=True, separators=(",", ":"))


def parse_exposition(text: str) -> list[tuple[str, str, float, str]]:
    """Every sample of a Prometheus text exposition as (metric, labels JSON, value, family type).

    Raises ValueError when the body is not Prometheus text.
    """
    rows = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            rows.append((sample.name, labels_json(sample.labels), float(sample.value), family.type))
    return rows


def scrape_once(client: httpx.Client, url: str) -> ScrapeResult:
    """Fetch and parse ``url`` once; failures are described, never raised."""
    start_wall, t0 = time.time(), time.perf_counter()

    def done(**kw) -> ScrapeResult:
        duration = time.perf_counter() - t0
        return ScrapeResult(wall=start_wall + duration / 2, duration_s=duration, **kw)

    try:
        response = client.get(url)
    except httpx.TimeoutException:
        return done(failure="timeout", message=f"no answer within {client.timeout.read:g} s")
    except httpx.HTTPError as err:
        return done(failure="connect", message=f"cannot connect ({type(err).__name__}: {err})"[:200])
    if response.status_code != 200:
        return done(failure=f"http_{response.status_code}", message=f"HTTP {response.status_code}")
    try:
        rows = parse_exposition(response.text)
    except (ValueError, IndexError, KeyError) as err:
        first = response.text.strip().splitlines()[0][:60] if response.text.strip() else ""
        return done(failure="not_prometheus", message=f"the body is not Prometheus text ({err}; it starts {first!r})"[:200])
    if not rows:
        return done(failure="empty", message="the body holds no sample")
    return done(rows=rows)


def result_columns(result: ScrapeResult, replica: str = "") -> dict[str, list]:
    """A scrape as store columns, with ``up``, ``scrape_duration_seconds`` and ``scrape_samples_scraped`` added."""
    up_labels = labels_json({"error": result.message or result.failure}) if result.failure else "{}"
    rows = result.rows + [
        (UP, up_labels, 0.0 if result.failure else 1.0, "gauge"),
        (SCRAPE_DURATION, "{}", result.duration_s, "gauge"),
        (SCRAPE_SAMPLES, "{}", float(len(result.rows)), "gauge"),
    ]
    return {
        "wall": [result.wall] * len(rows),
        "metric": [r[0] for r in rows],
        "labels": [r[1] for r in rows],
        "value": [r[2] for r in rows],
        "type": [r[3] for r in rows],
        "replica": [replica] * len(rows),
    }


def merge_columns(into: dict[str, list], more: dict[str, list]) -> None:
    for key, values in more.items():
        into.setdefault(key, []).extend(values)


def scrape_round(client: httpx.Client, targets: Sequence[tuple[str, str]], pool: ThreadPoolExecutor | None) -> list[ScrapeResult]:
    """Scrape every (replica, URL) once, side by side; with several, all results carry the round's mean wall.

    One wall per round is what lets a fleet figure add replicas seen at the same moment.
    """
    if pool is None or len(targets) == 1:
        return [scrape_once(client, url) for _, url in targets]
    results = list(pool.map(lambda t: scrape_once(client, t[1]), targets))
    wall = sum(r.wall for r in results) / len(results)
    for r in results:
        r.wall = wall
    return results


def scrape_loop(
    client: httpx.Client,
    targets: Sequence[tuple[str, str]],
    interval_s: float,
    writer: SampleWriter,
    stop: threading.Event,
    on_new_failure: Callable[[ScrapeResult, str], None],
    on_first_round: Callable[[], None] | None = None,
) -> None:
    """Scrape every ``interval_s`` (on a fixed grid; a slow round skips, never bunches) until ``stop``.

    ``targets`` are (replica id, URL) pairs, scraped together each round; ``on_new_failure``
    hears each kind of failure once per URL; ``on_first_round`` is called once, when the
    first round has ended (the parent waits for it before the first level).
    """
    seen: set[tuple[str, str]] = set()
    pending: dict[str, list] = {"wall": []}
    last_flush = time.monotonic()
    next_at = time.monotonic()
    pool = ThreadPoolExecutor(max_workers=min(16, len(targets))) if len(targets) > 1 else None
    try:
        while not stop.is_set():
            for (replica, url), result in zip(targets, scrape_round(client, targets, pool)):
                if result.failure and (url, result.failure) not in seen:
                    seen.add((url, result.failure))
                    on_new_failure(result, url)
                merge_columns(pending, result_columns(result, replica))
            if on_first_round is not None:
                on_first_round()
                on_first_round = None
            if interval_s >= FLUSH_EVERY_S or time.monotonic() - last_flush >= FLUSH_EVERY_S:
                writer.write_columns(pending)
                pending, last_flush = {"wall": []}, time.monotonic()
            now = time.monotonic()
            next_at += interval_s * max(1, math.ceil((now - next_at) / interval_s))
            stop.wait(max(0.0, next_at - now))
        writer.write_columns(pending)
    finally:
        if pool is not None:
            pool.shutdown(wait=False)
