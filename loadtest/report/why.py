"""summary.json's ``decode_fit`` and ``levels[].bound``: what limits an ordinary run's levels.

The terminal's line also names why the capacity stops where it does
(:mod:`loadtest.analysis.capacity_limit`, summary.json's ``capacity_limit``).

Thin glue between :mod:`loadtest.analysis.bounds` (the fit and the bounds)
and the summary: the fit as a dict with its plain-words sentence, and each
level's bound keyed by level index.
"""

from __future__ import annotations

import math
from typing import Any

from loadtest.analysis.bounds import PREFILLS_IN_MEDIAN, fit_run, level_bounds, prefills_per_step
from loadtest.analysis.capacity_limit import capacity_limit
from loadtest.analysis.decode_fit import describe_decode
from loadtest.analysis.roofline import bound_words, roofline_missing
from loadtest.analysis.run_cost import run_cost
from loadtest.analysis.stack import resolve_run


def _r(value: Any, digits: int = 4) -> Any:
    return round(float(value), digits) if isinstance(value, (int, float)) and math.isfinite(value) else None


def why(analysis: Any) -> tuple[dict[str, Any] | None, dict[int, dict[str, Any]]]:
    """(``decode_fit`` or None, ``{level index: bound dict}``); both empty for open-loop runs."""
    fit = fit_run(analysis)
    ceilings, model = resolve_run(analysis.run or {})
    bounds = level_bounds(analysis, fit, ceilings, model)
    if fit is None:
        return None, {i: b.to_dict() for i, b in bounds.items()}
    low = [b.bound for b in bounds.values() if fit.side(b.sequences) == "flat"]
    high = [b.bound for b in bounds.values() if fit.side(b.sequences) == "steep"]
    roof = ceilings is not None and model is not None
    bound_low = max(set(low), key=low.count) if roof and low else None
    bound_high = max(set(high), key=high.count) if roof and high else None
    if bound_low == "compute" and fit.knee_sequences is not None:
        # the roofline's word where the measured curve is flat: "compute-bound up to 13 sequences; past that
        # compute-bound" (a profile's sub-run). Below a measured knee a step is not compute-bound by its
        # shape, whatever the declared ceilings say: the shape's own words instead
        bound_low = None
    cap = analysis.capacity.concurrency
    at_cap = next((b for b in bounds.values() if b.concurrency == cap), None)
    sentence = describe_decode(fit, bound_low, bound_high)
    # the levels past the knee: where most steps also prefilled a newcomer, that is what bent them
    past = [prefills_per_step(lv) for lv in analysis.levels
            if lv.index in bounds and fit.knee_sequences is not None and fit.side(bounds[lv.index].sequences) == "steep"]
    prefills = max((p for p in past if math.isfinite(p)), default=None)
    if prefills is not None and prefills > PREFILLS_IN_MEDIAN:
        sentence += (f", but there most steps also computed a newcomer's prompt ({prefills:.1f} a step), which "
                     "looks the same (a loadtest profile tells them apart)")
    out = {
        "fixed_ms": _r(fit.fixed_ms), "per_seq_ms": _r(fit.per_seq_ms),
        "compute_ms_per_seq": _r(fit.compute_ms_per_seq), "compute_intercept_ms": _r(fit.compute_intercept_ms),
        "knee_sequences": _r(fit.knee_sequences, 2), "rms_ms": _r(fit.rms_ms),
        "basis": "roofline" if roof else "fit",
        "bound_at_capacity": at_cap.bound if at_cap else None,
        "sentence": sentence,
        # past the knee, the most newcomers admitted a step (null without a knee): above ln 2 the
        # knee may be the prefills' (analysis/bounds.py prefills_per_step)
        "prefills_per_step_past_knee": _r(prefills, 2) if prefills is not None else None,
        # what the roofline lacks to name the bound: "hardware", "model.params_b", or null
        "roofline_missing": roofline_missing(ceilings, model),
    }
    return out, {i: b.to_dict() for i, b in bounds.items()}


def capacity_bound_words(fit: dict[str, Any]) -> str:
    """``decode_fit.bound_at_capacity`` in words, with the prefills' doubt where the knee has it."""
    words = bound_words(fit["bound_at_capacity"], fit.get("roofline_missing"))
    if fit["bound_at_capacity"] == "compute" and (fit.get("prefills_per_step_past_knee") or 0) > PREFILLS_IN_MEDIAN:
        words += " or slowed by those prompts"
    return words


def limits_line(analysis: Any) -> str:
    """The terminal's line on what limits the capacity and what it costs ('' when nothing to say)."""
    fit, _ = why(analysis)
    parts = []
    limit = capacity_limit(analysis)
    if limit is not None:
        parts.append(f"why it stops there: {limit['sentence']}")
    if fit is not None:
        at = f"; at capacity the step is {capacity_bound_words(fit)}" if fit.get("bound_at_capacity") else ""
        parts.append(f"what limits it: {fit['sentence']}{at}")
    cost = run_cost(analysis)
    text = cost_line(cost, analysis.unary) if cost else ""
    if text:
        parts.append(text)
    return "\n".join(parts)


def usd(value: float) -> str:
    """A unit price small enough to need its digits: a unary run's cost a million input tokens or a
    thousand requests is cents ($0.034), which two decimals would round to $0.03 or $0.00."""
    return f"${value:.2f}" if value >= 0.1 else f"${value:.2g}"


def cost_line(cost: dict[str, Any], unary: bool) -> str:
    """The terminal's ``cost:`` line ('' when there is no unit price: no capacity level, nothing good).

    A stream is priced per million output tokens. A unary run (embeddings, rerank, score) has no
    output tokens, so it is priced per million input tokens (``usd_per_million_tokens``, prompt +
    output) and per thousand requests: keyed on output tokens alone, its line was left out though
    summary.json and the report had the cost.
    """
    fleet = (f", ${cost['usd_per_hour_fleet']:g}/h for the {cost['replicas']} replicas measured"
             if (cost.get("replicas") or 1) > 1 else "")
    per_hour = f"(${cost['usd_per_hour']:g}/h per replica{fleet})"
    if unary:
        tokens, requests = cost.get("usd_per_million_tokens"), cost.get("usd_per_thousand_requests")
        if tokens is None or requests is None:
            return ""
        text = (f"cost: {usd(tokens)} per million input tokens, {usd(requests)} per thousand requests "
                f"on goodput {per_hour}")
    elif cost.get("usd_per_million_output_tokens") is not None:
        text = f"cost: ${cost['usd_per_million_output_tokens']:.2f} per million output tokens on goodput {per_hour}"
    else:
        return ""
    fc = cost.get("forecast")
    if fc:
        text += (f"; {fc['peak']:g} peak {fc['unit']}: {fc['peak_replicas']} replicas, "
                 f"${fc['monthly_usd_autoscaled']:,.0f} a month autoscaled, ${fc['monthly_usd_static']:,.0f} static")
    return text
