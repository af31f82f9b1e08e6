"""summary.json's fleet keys: per-replica figures, imbalance, replicas, capacity per replica.

Kept apart from :mod:`loadtest.report.summary` (one idea per module); each function
returns the keys it adds, and a run of one server gets nulls, never a changed figure.
"""

from __future__ import annotations

from typing import Any

from loadtest.analysis.fleet import Imbalance
from loadtest.analysis.results import Analysis, LevelResult
from loadtest.analysis.silent_replicas import metrics_urls


def _stats(stats: Any) -> dict[str, Any]:
    if stats is None or not stats.n:
        return {"p50": None, "p95": None, "max": None, "n": 0}
    return {"p50": round(stats.p50, 4), "p95": round(stats.p95, 4), "max": round(stats.max, 4), "n": stats.n}


def level_replicas(analysis: Analysis, level: LevelResult) -> list[dict[str, Any]] | None:
    """``levels[].server.replicas``: each replica's id and p50/p95/max/n per signal (None: one server)."""
    view = analysis.server
    if view is None or view.fleet is None:
        return None
    per = view.fleet.replica_levels.get(level.index, {})
    return [
        {"id": rid, "signals": {s.metric: _stats(per.get(rid, {}).get(s.metric)) for s in view.signals}}
        for rid in view.fleet.replicas
    ]


def imbalance_dict(imb: Imbalance | None) -> dict[str, Any] | None:
    if imb is None:
        return None
    return {"ratio": round(imb.ratio, 3), "busiest_mean": round(imb.busiest, 3), "mean": round(imb.mean, 3), "n": imb.n}


def level_imbalance(analysis: Analysis, level: LevelResult) -> float | None:
    """``levels[].imbalance``: busiest/mean running requests, averaged over the level's rounds (None: one server)."""
    view = analysis.server
    if view is None or view.fleet is None:
        return None
    imb = view.fleet.imbalance.get(level.index)
    return None if imb is None else round(imb.ratio, 3)


def level_reporting(analysis: Analysis, level: LevelResult) -> dict[str, Any]:
    """``levels[].silent_replicas`` (the replicas whose every scrape failed in the window; null: one server)
    and ``levels[].replicas_serving`` (how many carried the level where the others' gauges show fewer than
    listed did; else null): see :mod:`loadtest.analysis.silent_replicas`."""
    view = analysis.server
    rep = view.fleet.reporting.get(level.index) if view is not None and view.fleet is not None else None
    return {"silent_replicas": list(rep.silent) if rep is not None else None,
            "replicas_serving": rep.serving if rep is not None else None}


def per_replica(analysis: Analysis) -> float | None:
    """``capacity.per_replica``: users (open loop: req/s) per replica at the fleet's capacity."""
    replicas = analysis.autoscaling.replicas if analysis.autoscaling else None
    cap = analysis.capacity
    load = cap.rate_rps if cap.rate_rps is not None else cap.concurrency
    if not replicas or load is None:
        return None
    return round(load / replicas, 3)


def target_replicas(analysis: Analysis) -> dict[str, Any]:
    """``target.replicas`` (declared or counted; null when unknown) and ``target.replicas_source``."""
    a = analysis.autoscaling
    return {"replicas": a.replicas if a else None, "replicas_source": a.replicas_source if a else None}


def autoscaling_fleet(analysis: Analysis) -> dict[str, Any]:
    """``autoscaling`` keys: thresholds are per pod; the replicas and the balancer's imbalance at capacity."""
    a = analysis.autoscaling
    if a is None:
        return {}
    return {
        "per": "pod",
        "replicas": a.replicas,
        "imbalance_at_capacity": imbalance_dict(a.imbalance_at_capacity),
        "fleet_message": a.fleet_sentence or None,
    }


def server_metrics_fleet(analysis: Analysis) -> dict[str, Any]:
    """``server_metrics`` keys: the sources (``urls``, ``prometheus``) and the replica ids seen."""
    settings = analysis.run.get("server_metrics") or {}
    view = analysis.server
    return {
        "urls": list(settings.get("urls") or []),
        "prometheus": settings.get("prometheus"),
        "replicas": list(view.fleet.replicas) if view is not None and view.fleet is not None else [],
        "silent_replicas": silent_replicas(analysis),
    }


def silent_replicas(analysis: Analysis) -> list[dict[str, Any]]:
    """``server_metrics.silent_replicas``: each replica whose metrics did not answer at some level."""
    view = analysis.server
    if view is None or view.fleet is None:
        return []
    urls = metrics_urls(analysis.run.get("server_metrics"))
    by_index = {lv.index: lv for lv in analysis.levels}
    return [
        {"id": rid, "url": urls.get(rid), "scrapes": s.scrapes, "answered": s.answered, "error": s.error or None,
         "levels": [_load(by_index[i]) for i in s.silent_levels if i in by_index]}
        for rid, s in sorted(view.fleet.scrapes.items()) if s.silent_levels
    ]


def _load(level: LevelResult) -> float | int:
    """A level as the summary names it: its users, or its rate in open loop."""
    return level.rate_rps if level.rate_rps is not None else level.concurrency
