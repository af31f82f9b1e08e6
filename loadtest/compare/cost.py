"""The cost change between baseline and candidate: what a change (quantization, batching) saves.

Why in compare: engineers judge such a change "one at a time, against a
baseline", and by what it costs as much as by its latency. Read from each
side's summary.json ``cost`` (a run priced with ``--usd-per-hour`` or the
scenario's ``cost:``); nothing when either side has no price. The forecast
compares like with like: the candidate's peak (else the baseline's) is
re-planned on both sides with each side's own capacity, price and headroom.
"""

from __future__ import annotations

from typing import Any, Mapping

from loadtest.analysis.cost import change, forecast
from loadtest.compare.level_keys import CAPACITY_KEY, USERS, load_change

KEYS = ("usd_per_million_output_tokens", "usd_per_million_tokens", "usd_per_thousand_requests")


def _replicas(summary: Mapping[str, Any]) -> int:
    return max(1, int((summary.get("target") or {}).get("replicas") or 1))


def _forecast_for(summary: Mapping[str, Any], capacity: Any, unit: str, peak: float, shape: Any) -> dict[str, Any] | None:
    cost = summary["cost"]
    own = cost.get("forecast") or {}
    per = capacity if unit == "users" else cost.get("goodput_rps")
    if not per:
        return None
    per = float(per) / _replicas(summary)  # a fleet's: one replica's share
    headroom = own.get("headroom", 0.2)
    return forecast(cost["usd_per_hour"], float(per), peak, unit=unit, headroom=headroom, daily_shape=shape).to_dict()


def cost_change(baseline: Mapping[str, Any], candidate: Mapping[str, Any], unit: str = USERS) -> dict[str, Any] | None:
    """compare.json's ``cost``: both sides' unit costs and their relative change, and the forecast.
    ``unit``: what the capacities count (:mod:`level_keys`: users, at a rate req/s or a speedup)."""
    cb, cc = baseline.get("cost"), candidate.get("cost")
    if not cb or not cc:
        return None
    cap_b = (baseline.get("capacity") or {}).get(CAPACITY_KEY[unit])
    cap_c = (candidate.get("capacity") or {}).get(CAPACITY_KEY[unit])
    out: dict[str, Any] = {
        "capacity": {"baseline": cap_b, "candidate": cap_c},
        # each side's capacity is its whole endpoint's: a fleet's is split over these to compare per replica
        "replicas": {"baseline": _replicas(baseline), "candidate": _replicas(candidate)},
        "usd_per_hour": {"baseline": cb.get("usd_per_hour"), "candidate": cc.get("usd_per_hour")},
    }
    for key in KEYS:
        out[key] = {"baseline": cb.get(key), "candidate": cc.get(key), "change": change(cb.get(key), cc.get(key))}
    plan = cc.get("forecast") or cb.get("forecast")
    out["forecast"] = None
    if plan:
        shape = plan.get("daily_shape")
        fb = _forecast_for(baseline, cap_b, plan["unit"], plan["peak"], shape)
        fc = _forecast_for(candidate, cap_c, plan["unit"], plan["peak"], shape)
        if fb and fc:
            out["forecast"] = {
                "unit": plan["unit"], "peak": plan["peak"],
                "replicas": {"baseline": fb["peak_replicas"], "candidate": fc["peak_replicas"]},
                "monthly_usd_autoscaled": {"baseline": fb["monthly_usd_autoscaled"], "candidate": fc["monthly_usd_autoscaled"],
                                           "change": change(fb["monthly_usd_autoscaled"], fc["monthly_usd_autoscaled"])},
                "monthly_usd_static": {"baseline": fb["monthly_usd_static"], "candidate": fc["monthly_usd_static"],
                                       "change": change(fb["monthly_usd_static"], fc["monthly_usd_static"])},
            }
    out["sentence"] = cost_sentence(out, unit)
    return out


def _usd(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def _pct(value: Any) -> str:
    return "" if value is None else f", {value * 100:+.0f}%".replace("-", "−")


def cost_sentence(d: Mapping[str, Any], unit: str = USERS) -> str:
    """``capacity 10 → 14 users per replica: $/1M output tokens 3.10 → 2.21, −29%; at 36 peak users 4 → 3 replicas, $8,900 → $6,700 a month``
    (``capacity 8 → 10 req/s per replica …`` at a rate)."""
    cap = d["capacity"]
    replicas = d.get("replicas") or {"baseline": 1, "candidate": 1}
    rb, rc = replicas["baseline"], replicas["candidate"]
    # the capacities are the endpoints': "per replica" only where each side is one replica (a fleet of 2
    # holding 16 read "16 users per replica"), else with the replicas and each one's share
    if unit == USERS or cap["baseline"] is None or cap["candidate"] is None:
        held = f"capacity {cap['baseline']} → {cap['candidate']} {unit}"
    else:  # a rate's capacity, as the gate names levels
        held = f"capacity {load_change(cap['baseline'], cap['candidate'], unit)}"
    if rb == rc == 1:
        held += " per replica"
    elif cap["baseline"] is not None and cap["candidate"] is not None:
        held += (f" ({rb} → {rc} replicas: {cap['baseline'] / rb:g} → {cap['candidate'] / rc:g} per replica)")
    out, what = d["usd_per_million_output_tokens"], "output tokens"
    if out["baseline"] is None and out["candidate"] is None and d.get("usd_per_million_tokens"):
        out, what = d["usd_per_million_tokens"], "tokens"  # embeddings, rerank, score: no output tokens to price
    text = f"{held}: $/1M {what} {_usd(out['baseline'])} → {_usd(out['candidate'])}{_pct(out['change'])}"
    fc = d.get("forecast")
    if fc:
        unit = "peak users" if fc["unit"] == "users" else "peak req/s"
        monthly = fc["monthly_usd_autoscaled"]
        text += (f"; at {fc['peak']:g} {unit} {fc['replicas']['baseline']} → {fc['replicas']['candidate']} replicas, "
                 f"${_usd(monthly['baseline'])} → ${_usd(monthly['candidate'])} a month")
    return text
