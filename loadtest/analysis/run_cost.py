"""The cost of an analyzed run: $ per million tokens at capacity, and the forecast's monthly bill.

Why a module apart from :mod:`cost`: that one is arithmetic; this one finds
its inputs in an :class:`~loadtest.analysis.results.Analysis` (the capacity
level, the tokens of the requests that met the SLO there, the autoscaling
headroom) and in the options the run was given (run.json ``cost_options``:
``--usd-per-hour``, ``--peak-users``, ``--peak-rps``), falling back on the
scenario's ``cost:`` section. Pure over the analysis.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from loadtest.analysis.cost import Served, forecast, unit_cost
from loadtest.analysis.served_span import level_cohort, rate_weights
from loadtest.analysis.windows import served_from, window_shares


def price_per_hour(run: Mapping[str, Any]) -> float | None:
    """$/hour per replica: ``--usd-per-hour``, else ``cost.usd_per_hour``, else per accelerator × count."""
    options = run.get("cost_options") or {}
    if options.get("usd_per_hour"):
        return float(options["usd_per_hour"])
    scenario = run.get("scenario") or {}
    cost = scenario.get("cost") or {}
    if cost.get("usd_per_hour"):
        return float(cost["usd_per_hour"])
    if cost.get("usd_per_accelerator_hour"):
        count = (scenario.get("hardware") or {}).get("count") or 1
        return float(cost["usd_per_accelerator_hour"]) * int(count)
    return None


def served_at(analysis: Any, level: Any) -> Served:
    """What the level served per second: goodput and the good requests' tokens, and all successes."""
    frame = analysis.requests
    out_good = prompt_good = 0.0
    out_ok: float | None = None
    if frame is not None and len(frame) and "end_wall" in frame and level.window_start is not None:
        # the good requests' tokens, each request by the share of its life in the level's window, as
        # goodput_rps counts it (windows.window_shares: a short window's lock-step batches)
        begin = served_from(frame["start_wall"].to_numpy(dtype=float), frame["ttft_ms"].to_numpy(dtype=float),
                            level.rate_rps is not None, frame["ttfb_ms"].to_numpy(dtype=float))
        # at a rate over the span goodput_rps was counted on (served_span: the window shifted by a life)
        lo, hi = level.served_span or (level.window_start, level.end_wall)
        share = (rate_weights(frame, level_cohort(frame, level.index), lo, hi) if level.rate_rps is not None
                 else window_shares(begin, frame["end_wall"].to_numpy(dtype=float), lo, hi))
        ok = frame["ok"].to_numpy()
        tokens = frame["completion_tokens"].to_numpy(dtype=float)
        # every success's tokens the same way, for the "ignoring the SLO" contrast: the level's own
        # tokens/s counts chunks as they arrived, a different estimate of the same flow, which came
        # out up to 1% below the good requests' where every request was good (goodput looked dearer)
        out_ok = float(np.nansum(tokens * np.where(ok, share, 0.0)))
        share = np.where(ok & frame["good"].to_numpy(), share, 0.0)
        out_good = float(np.nansum(tokens * share))
        if "prompt_tokens" in frame:
            prompt_good = float(np.nansum(frame["prompt_tokens"].to_numpy(dtype=float) * share))
    seconds = (level.served_span[1] - level.served_span[0]) if level.served_span else level.window_s
    seconds = seconds if seconds and seconds > 0 else math.nan
    return Served(
        goodput_rps=level.goodput_rps,
        good_output_tokens_per_s=out_good / seconds,
        good_prompt_tokens_per_s=prompt_good / seconds,
        requests_per_s=level.requests_per_s,
        output_tokens_per_s=level.output_tokens_per_s if out_ok is None else out_ok / seconds,
    )


def _capacity_level(analysis: Any) -> Any | None:
    cap = analysis.capacity
    if cap.rate_rps is not None:
        same = [lv for lv in analysis.levels if lv.rate_rps == cap.rate_rps]
        return same[-1] if same else None
    if cap.concurrency is None:
        return None
    return analysis.level(cap.concurrency)


def run_cost(analysis: Any) -> dict[str, Any] | None:
    """summary.json's ``cost``, or None without a price."""
    run = analysis.run or {}
    usd = price_per_hour(run)
    if usd is None:
        return None
    level = _capacity_level(analysis)
    out: dict[str, Any] = {"usd_per_hour": usd, "capacity_concurrency": analysis.capacity.concurrency,
                           "capacity_rate_rps": analysis.capacity.rate_rps}
    if level is None:
        out["note"] = "no capacity level: no level met the SLOs, so nothing was served at a price"
        out.update(usd_per_million_output_tokens=None, usd_per_million_tokens=None, usd_per_thousand_requests=None)
        return out
    served = served_at(analysis, level)
    # the price is per replica, what a fleet served the whole fleet's: it costs replicas × the price
    replicas = measured_replicas(analysis)
    out.update(unit_cost(usd * replicas, served).to_dict())
    # usd_per_hour stays the price given (per replica); what the measured fleet cost is beside it
    out.update(usd_per_hour=usd, replicas=replicas, usd_per_hour_fleet=usd * replicas)
    out.update(goodput_rps=served.goodput_rps, good_output_tokens_per_s=served.good_output_tokens_per_s,
               good_prompt_tokens_per_s=served.good_prompt_tokens_per_s)
    shape = ((run.get("scenario") or {}).get("cost") or {}).get("daily_shape")
    plan = peak_plan(analysis, served)
    fc = None
    if plan is not None:
        unit, per_replica, peak, headroom = plan
        fc = forecast(usd, per_replica, peak, unit=unit, headroom=headroom, daily_shape=shape)
    out["forecast"] = fc.to_dict() if fc is not None else None
    return out


def peak_plan(analysis: Any, served: Served | None = None) -> tuple[str, float, float, float] | None:
    """What the peak is planned on: (unit, one replica's capacity, the peak, the headroom), or None.

    ``--peak-users`` plans on the capacity in users, ``--peak-rps`` on the goodput at the capacity
    level; a fleet's either is split over its replicas. The forecast prices this plan, and
    autoscaling.yaml's maxReplicas is its replica count, with or without a price.
    """
    options = (analysis.run or {}).get("cost_options") or {}
    headroom = getattr(analysis.autoscaling, "headroom", None)
    headroom = 0.2 if headroom is None else float(headroom)
    replicas = measured_replicas(analysis)
    if options.get("peak_users") and analysis.capacity.concurrency:
        return "users", analysis.capacity.concurrency / replicas, float(options["peak_users"]), headroom
    if options.get("peak_rps"):
        level = _capacity_level(analysis)
        served = served if served is not None else (served_at(analysis, level) if level is not None else None)
        if served is not None and served.goodput_rps > 0:
            return "rps", served.goodput_rps / replicas, float(options["peak_rps"]), headroom
    return None


def measured_replicas(analysis: Any) -> int:
    """The replicas the capacity was measured on (a fleet's, declared or counted; else one).

    Every per-replica figure (the forecast, maxReplicas, the report's calculator and its
    "at capacity" line) divides the fleet's by this one count.
    """
    return max(1, int(getattr(analysis.autoscaling, "replicas", None) or 1))
