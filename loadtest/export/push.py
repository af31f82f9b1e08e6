"""``--pushgateway URL``: push the run's summary when it ends.

A CronJob's run may be over before Prometheus scrapes it; the Pushgateway keeps
the last push of each group (job ``loadtest``, label ``scenario``) until the next.
What is pushed comes from ``summary.json`` (the analysis, not the live counts):

- ``loadtest_capacity`` (users in closed loop, requests/s in open loop and trace replay; the certain
  capacity), ``loadtest_capacity_upper_bound``, ``loadtest_max_tested``, in the same unit;
- ``loadtest_load_mode{mode}`` = 1 (``closed_loop``, ``open_loop``, ``trace_replay``): which unit
  those are in, since their names cannot say it;
- ``loadtest_capacity_rate_rps`` (open loop and trace replay: the capacity in requests/s, by name)
  and ``loadtest_capacity_speedup`` (trace replay: the capacity as a speedup of the trace window);
  absent where they do not apply;
- ``loadtest_capacity_verdict{verdict}`` = 1 (``exact``, ``at_least``, ``below_min`` …);
- ``loadtest_summary_latency_seconds{level,metric,quantile}``: each level's percentiles
  of ``ttft``, ``itl``, ``tpot``, ``e2e``;
- ``loadtest_summary_error_rate{level}``, ``loadtest_summary_output_tokens_per_second{level}``,
  ``loadtest_summary_level_passed{level}`` (1 pass, 0 not);
- ``loadtest_run_completed_timestamp_seconds``: when it was pushed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from loadtest.urls import split_userinfo

QUANTILES = {"p50": "0.5", "p90": "0.9", "p95": "0.95", "p99": "0.99"}
LATENCIES = ("ttft", "itl", "tpot", "e2e")
PUSHED_NAMES = ("loadtest_capacity", "loadtest_capacity_upper_bound", "loadtest_max_tested", "loadtest_capacity_verdict",
                "loadtest_load_mode", "loadtest_capacity_rate_rps", "loadtest_capacity_speedup",
                "loadtest_summary_latency_seconds", "loadtest_summary_error_rate",
                "loadtest_summary_output_tokens_per_second", "loadtest_summary_level_passed",
                "loadtest_run_completed_timestamp_seconds")


def _level(level: dict[str, Any]) -> str:
    rate = level.get("rate_rps")
    return f"{rate:g}" if rate is not None else str(level["concurrency"])


def summary_load_mode(summary: dict[str, Any]) -> str:
    """The run's load mode (run.json's ``load_mode``) as its summary shows it: a speedup, a rate, or neither.

    summary.json has no key of its own for it; every trace-replay level has a ``speedup`` and every
    open-loop level a ``rate_rps``, as the capacity's ``*_speedup`` and ``*_rate_rps`` keys.
    """
    cap = summary.get("capacity") or {}
    levels = summary.get("levels") or []
    if any(level.get("speedup") is not None for level in levels) or cap.get("max_tested_speedup") is not None:
        return "trace_replay"
    if (any(level.get("rate_rps") is not None for level in levels) or cap.get("rate_rps") is not None
            or cap.get("max_tested_rate_rps") is not None):
        return "open_loop"
    return "closed_loop"


def summary_registry(summary: dict[str, Any]):
    """A registry holding the summary's gauges (pure: nothing is sent)."""
    # prometheus_client: only when --push-gateway is given
    from prometheus_client import CollectorRegistry, Gauge

    reg = CollectorRegistry()
    name = summary.get("name") or ""
    cap = summary.get("capacity") or {}
    mode = summary_load_mode(summary)
    open_loop = mode != "closed_loop"

    def scalar(metric: str, text: str, value: Any) -> None:
        g = Gauge(metric, text, ["scenario"], registry=reg)
        if value is not None:
            g.labels(name).set(float(value))

    scalar("loadtest_capacity", "Capacity within the SLOs: users, or requests/s in open loop and trace replay "
           "(loadtest_load_mode says which)", cap.get("rate_rps") if open_loop else cap.get("concurrency"))
    modes = Gauge("loadtest_load_mode", "1 for the run's load mode: closed_loop (capacities in users), "
                  "open_loop or trace_replay (in requests/s)", ["scenario", "mode"], registry=reg)
    modes.labels(name, mode).set(1)
    if open_loop:
        scalar("loadtest_capacity_rate_rps", "Capacity within the SLOs in requests/s (open loop, trace replay)",
               cap.get("rate_rps"))
    if mode == "trace_replay":
        scalar("loadtest_capacity_speedup", "Capacity within the SLOs as a speedup of the trace window",
               cap.get("speedup"))
    scalar("loadtest_capacity_upper_bound", "The last level below the first certain failure",
           cap.get("upper_bound_rate_rps") if open_loop else cap.get("upper_bound"))
    scalar("loadtest_max_tested", "The highest level tested", cap.get("max_tested_rate_rps") if open_loop else cap.get("max_tested"))
    verdict = Gauge("loadtest_capacity_verdict", "1 for the run's capacity verdict", ["scenario", "verdict"], registry=reg)
    if cap.get("verdict"):
        verdict.labels(name, cap["verdict"]).set(1)
    lat = Gauge("loadtest_summary_latency_seconds", "Each level's latency percentiles from the analysis",
                ["scenario", "level", "metric", "quantile"], registry=reg)
    err = Gauge("loadtest_summary_error_rate", "Each level's error rate", ["scenario", "level"], registry=reg)
    tps = Gauge("loadtest_summary_output_tokens_per_second", "Each level's output tokens/s", ["scenario", "level"], registry=reg)
    passed = Gauge("loadtest_summary_level_passed", "1 if the level passed its SLOs, else 0", ["scenario", "level"], registry=reg)
    for level in summary.get("levels") or []:
        label = _level(level)
        for metric in LATENCIES:
            stats = level.get(f"{metric}_ms") or {}
            for key, q in QUANTILES.items():
                if stats.get(key) is not None:
                    lat.labels(name, label, metric, q).set(stats[key] / 1000.0)
        if level.get("error_rate") is not None:
            err.labels(name, label).set(level["error_rate"])
        if level.get("output_tokens_per_s") is not None:
            tps.labels(name, label).set(level["output_tokens_per_s"])
        passed.labels(name, label).set(1.0 if level.get("passed") else 0.0)
    done = Gauge("loadtest_run_completed_timestamp_seconds", "When the run's summary was pushed", ["scenario"], registry=reg)
    done.labels(name).set(time.time())
    return reg


def push_summary(gateway: str, summary_path: Path) -> None:
    """Replace the group ``job=loadtest, scenario=<name>`` on the Pushgateway with this run's summary.

    A ``user:password@`` in the URL is sent as HTTP Basic auth (the Pushgateway's
    ``--web.config.file`` basic auth), never left in the URL: urllib would take
    ``user:password@host`` for the host name and ask the system resolver for it.
    """
    # prometheus_client: only when --push-gateway is given
    from prometheus_client import push_to_gateway
    from prometheus_client.exposition import basic_auth_handler, default_handler

    url, userinfo = split_userinfo(gateway)

    def handler(url: str, method: str, timeout: float | None, headers: list, data: bytes):
        if userinfo is None:
            return default_handler(url, method, timeout, headers, data)
        return basic_auth_handler(url, method, timeout, headers, data, *userinfo)

    summary = json.loads(Path(summary_path).read_text())
    push_to_gateway(url, job="loadtest", grouping_key={"scenario": summary.get("name") or "loadtest"},
                    registry=summary_registry(summary), timeout=10, handler=handler)
