"""summary.json's server blocks: ``levels[].server``, ``server_metrics`` and ``autoscaling``.

Apart from :mod:`loadtest.report.summary` because they say what the server's own ``/metrics``
showed and what to scale on, not what the client measured; that module assembles them with the
rest. Figures are rounded as the rest of the summary is (:func:`round_figure`).
"""

from __future__ import annotations

import math
from typing import Any

from loadtest.analysis.results import Analysis, LevelResult
from loadtest.report.fleet_summary import autoscaling_fleet, level_replicas, server_metrics_fleet


def round_figure(value: float | None, digits: int = 3) -> float | None:
    """A figure rounded to ``digits``; None, NaN and infinity as they are (the summary writes them as null)."""
    if value is None or not math.isfinite(value):
        return value
    return round(float(value), digits)


def _signal_stats(stats: Any) -> dict[str, Any] | None:
    if stats is None or not stats.n:
        return None
    return {"p50": round_figure(stats.p50, 4), "p95": round_figure(stats.p95, 4), "max": round_figure(stats.max, 4), "n": stats.n}


def level_server_dict(analysis: Analysis, level: LevelResult) -> dict[str, Any]:
    """``levels[].server``: each known signal's p50/p95/max over the level's measured window."""
    view = analysis.server
    if view is None:
        return {}
    out = {}
    for signal in view.signals:
        stats = _signal_stats(view.stats(level.index, signal.metric))
        out[signal.metric] = {**(stats or {"p50": None, "p95": None, "max": None, "n": 0}),
                              "role": signal.role, "server": signal.server}
    replicas = level_replicas(analysis, level)
    if replicas is not None:
        out["replicas"] = replicas
    return out


def server_metrics_dict(analysis: Analysis) -> dict[str, Any]:
    view = analysis.server
    settings = analysis.run.get("server_metrics") or {}
    if view is None:
        # not scraped: turned off, or a run from before scraping existed
        return {"enabled": False, "url": None}
    by_index = {lv.index: lv for lv in analysis.levels}
    return {
        "enabled": True,
        "url": view.url,
        "interval_s": settings.get("interval_s"),
        "signals": [{"metric": s.metric, "role": s.role, "server": s.server} for s in view.signals],
        "scrapes": view.total.to_json(),
        **server_metrics_fleet(analysis),
        "levels": [
            {"concurrency": by_index[i].concurrency, "index": i, **h.to_json()}
            for i, h in sorted(view.health.items()) if i in by_index
        ],
    }


def autoscaling_dict(analysis: Analysis) -> dict[str, Any] | None:
    a = analysis.autoscaling
    if a is None:
        return None
    return {
        "target_concurrency_per_replica": a.target_concurrency_per_replica,
        # open loop: capacity.rate_rps x (1 - headroom); null in closed loop
        "target_rate_rps_per_replica": a.target_rate_rps_per_replica,
        # open loop: the rate the capacity level's growing queue says the server sustains (caps the target)
        "sustainable_rate_rps": round_figure(a.sustainable_rate_rps, 4),
        "headroom": round_figure(a.headroom, 4),
        "headroom_source": a.headroom_source,
        "options": a.options.to_dict(),
        "capacity": a.capacity,
        "first_failing": a.first_failing,
        "best": a.best,
        "signals": [
            {
                "metric": s.metric,
                "role": s.role,
                "server": s.server,
                "at_capacity": _signal_stats(s.at_capacity),
                "at_first_failing": _signal_stats(s.at_first_failing),
                "threshold": s.threshold,
                # what the threshold is set on (p50, time_mean, client_in_flight; null: too few scrapes) and its value
                "basis": s.basis,
                "basis_value": round_figure(s.basis_value, 4),
                "separates": s.separates,
                "why": s.why,
            }
            for s in a.signals
        ],
        "message": a.paragraph,
        **autoscaling_fleet(analysis),
    }
