"""``target.metrics.prometheus``: every replica's signals from a Prometheus server, after the run.

In a cluster the load generator cannot reach each pod, but Prometheus scrapes them all.
So instead of scraping during the run, the child process waits for the run to end and
then asks Prometheus's HTTP API once (``/api/v1/query_range`` over the run's span, step =
``target.metrics.interval_s``), off the hot path by construction. Each returned series is
one replica's (its ``pod`` label, else ``instance``, or ``replica_label``); its points go
into ``server_metrics.parquet`` as if scraped, all replicas at the same step timestamps,
so fleet sums add replicas seen at one moment. Prometheus's own ``up`` per target is
read too, as the scrape health.

A query_range point is the last sample at or before the step's time, so every figure
lags the replica by up to one of Prometheus's scrape intervals.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from typing import Any, Iterable, Mapping

import httpx

from loadtest.redact import public_url
from loadtest.scrape.scraper import labels_json
from loadtest.scrape.store import UP, SampleWriter

#: Prometheus refuses more than 11,000 points per series; stay under it.
MAX_POINTS = 10_000
#: Series the mixed-replica check and the scrape health also want.
PROCESS_START = "process_start_time_seconds"
QUERY_TIMEOUT_S = 30.0


def metric_names(known: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    """The signals to read: the known ones (the parent passes analysis.signals'), the scenario's, and ``up``."""
    names = list(known) + list(extra) + [PROCESS_START, UP]
    return list(dict.fromkeys(names))


def series_query(names: Iterable[str], selector: str) -> str:
    """One PromQL selector for all names: ``{__name__=~"a|b",<selector>}``."""
    matchers = selector.strip()
    if matchers.startswith("{"):
        matchers = matchers[1:-1].strip()
    regex = "|".join(re.escape(n).replace("\\:", ":") for n in names)
    return "{" + f'__name__=~"{regex}"' + (f",{matchers}" if matchers else "") + "}"


def step_for(start: float, end: float, interval_s: float) -> float:
    return max(interval_s, (end - start) / MAX_POINTS)


def replica_of(labels: Mapping[str, str], replica_label: str | None) -> str:
    if replica_label:
        return labels.get(replica_label, "")
    return labels.get("pod") or labels.get("instance") or ""


def matrix_columns(result: list[dict[str, Any]], replica_label: str | None) -> dict[str, list]:
    """A query_range ``matrix`` result as store columns (one row per point)."""
    cols: dict[str, list] = {"wall": [], "metric": [], "labels": [], "value": [], "type": [], "replica": []}
    for series in result:
        labels = dict(series.get("metric") or {})
        name = labels.pop("__name__", "")
        replica = replica_of(labels, replica_label)
        text = labels_json(labels)
        for t, v in series.get("values") or []:
            cols["wall"].append(float(t))
            cols["metric"].append(name)
            cols["labels"].append(text)
            cols["value"].append(float(v))
            cols["type"].append("unknown")
            cols["replica"].append(replica)
    return cols


def query_range(client: httpx.Client, base: str, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    """The matrix Prometheus answers; ValueError with its own words when it refuses."""
    response = client.get(f"{base}/api/v1/query_range", params={"query": query, "start": start, "end": end, "step": step})
    try:
        body = response.json()
    except ValueError:
        raise ValueError(f"HTTP {response.status_code}, not a Prometheus API answer") from None
    if body.get("status") != "success":
        raise ValueError(f"{body.get('errorType', 'error')}: {body.get('error', response.status_code)}")
    return list((body.get("data") or {}).get("result") or [])


def read_prometheus(_target_client: httpx.Client, settings: Mapping[str, Any], stop: threading.Event, writer: SampleWriter) -> None:
    """Wait for the run to end (``stop``), then read its span from Prometheus into ``writer``.

    The target's client is not used: its headers and API key are the target's, never Prometheus's.
    """
    source = settings["prometheus"]
    interval_s = float(settings["interval_s"])
    start = float(settings.get("started_wall") or time.time())
    stop.wait()
    time.sleep(min(interval_s, 5.0))  # the run's last moments reach Prometheus's next scrape
    end = time.time()
    names = metric_names(settings.get("known_signals") or (), settings.get("signals") or ())
    query = series_query(names, source.get("selector") or "")
    try:
        with httpx.Client(timeout=QUERY_TIMEOUT_S, trust_env=False, follow_redirects=True) as client:
            result = query_range(client, source["url"], query, start, end, step_for(start, end, interval_s))
    except (httpx.HTTPError, ValueError) as err:
        message = f"Prometheus {public_url(source['url'])} did not answer the query ({type(err).__name__}: {err})"[:300]
        print(f"warning: server metrics: {message}", file=sys.stderr, flush=True)
        writer.write_columns({"wall": [end], "metric": [UP], "labels": [json.dumps({"error": message})],
                              "value": [0.0], "type": ["gauge"], "replica": [""]})
        return
    if not result:
        print(f"warning: server metrics: Prometheus {public_url(source['url'])} has no series for {query}",
              file=sys.stderr, flush=True)
    writer.write_columns(matrix_columns(result, source.get("replica_label")))
