"""Per level and per check: the change between the runs, its interval and its verdict.

With records on both sides the interval is a bootstrap of the requests (see
:mod:`delta`); without, it is approximated from the summaries' own intervals by
the delta method. A level where either run's load generator was saturated or
its host busy cannot prove a regression.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Mapping

from loadtest.analysis.bootstrap import rng_for
from loadtest.analysis.slo import PERCENTILES
from loadtest.compare import delta
from loadtest.compare.change import Change, classify, describe_change, untrusted_note
from loadtest.compare.rules import ABSOLUTE, ERROR_RATE, THROUGHPUT, VALID_OUTPUT, Rules
from loadtest.compare.samples import LevelSamples
from loadtest.compare.stationarity import hold_drifting
from loadtest.compare.summary_values import ci as _ci
from loadtest.compare.summary_values import num as _num
from loadtest.compare.summary_values import pair as _pair
from loadtest.compare.summary_values import point as _point


def _levels_by_concurrency(summary: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for level in summary.get("levels") or []:
        if level.get("status") == "no_data" or level.get("concurrency") is None:
            continue
        previous = out.get(int(level["concurrency"]))
        if previous is None or (level.get("requests") or 0) > (previous.get("requests") or 0):
            out[int(level["concurrency"])] = level
    return out


def level_changes(
    side_b: Any,
    side_c: Any,
    samples_b: dict[int, LevelSamples],
    samples_c: dict[int, LevelSamples],
    latency_checks: list[str],
    rules: Rules,
    confidence: float,
    seed: int,
    warnings: list[str],
) -> list[Change]:
    levels_b = _levels_by_concurrency(side_b.summary)
    levels_c = _levels_by_concurrency(side_c.summary)
    common = sorted(set(levels_b) & set(levels_c))
    only = sorted(set(levels_b) ^ set(levels_c))
    if only:
        warnings.append(
            "levels measured by one run only are not compared: " + ", ".join(str(c) for c in only)
        )
    saturated = [c for c in common if levels_b[c].get("client_saturated") or levels_c[c].get("client_saturated")]
    if saturated:
        warnings.append(
            "the load generator was saturated at " + ", ".join(str(c) for c in saturated)
            + " users in at least one run: changes there may be the client's, not the server's"
        )
    contended = [c for c in common if levels_b[c].get("host_contended") or levels_c[c].get("host_contended")]
    if contended:
        warnings.append(
            "the host running the load generator was busy with other work at " + ", ".join(str(c) for c in contended)
            + " users in at least one run: changes there may be the host's, not the server's"
        )
    out: list[Change] = []
    for conc in common:
        lb, lc = levels_b[conc], levels_c[conc]
        sb, sc = samples_b.get(conc), samples_c.get(conc)
        for check in latency_checks + [THROUGHPUT, ERROR_RATE, VALID_OUTPUT]:
            change = _level_change(check, conc, lb, lc, sb, sc, rules, confidence, seed)
            if change is not None:
                hold_drifting(change, {**side_b.drifting, **side_c.drifting})
                out.append(change)
    return out


def _level_change(
    check: str,
    conc: int,
    lb: Mapping[str, Any],
    lc: Mapping[str, Any],
    sb: LevelSamples | None,
    sc: LevelSamples | None,
    rules: Rules,
    confidence: float,
    seed: int,
) -> Change | None:
    kind = "latency" if check not in (THROUGHPUT, *ABSOLUTE) else ("throughput" if check == THROUGHPUT else check)
    rng_b = rng_for(seed, "compare-baseline", conc, check)
    rng_c = rng_for(seed, "compare-candidate", conc, check)
    tol = rules.tolerance_for(check)
    if kind == "latency":
        metric, _, pct = check.partition(".")
        vb, vc = _point(lb, metric, pct), _point(lc, metric, pct)
        if math.isnan(vb) or math.isnan(vc):
            return None  # a metric without samples in one run (e.g. TPOT of one-token replies)
        point = float(delta.relative_change(vc, vb))
        if sb is not None and sc is not None:
            q = PERCENTILES[pct]
            reps = delta.relative_change(
                delta.percentile_replicates(sc.latency[metric], q, rng_c),
                delta.percentile_replicates(sb.latency[metric], q, rng_b),
            )
            ci = delta.central_interval(reps, confidence)
        else:
            ci = _approx_relative(vb, vc, _ci(lb, metric, pct), _ci(lc, metric, pct), confidence)
        badness = (point, ci[0], ci[1])
    elif kind == "throughput":
        vb, vc = _num(lb.get(THROUGHPUT)), _num(lc.get(THROUGHPUT))
        if math.isnan(vb) or math.isnan(vc):
            return None
        point = float(delta.relative_change(vc, vb))
        if sb is not None and sc is not None:
            reps = delta.relative_change(
                delta.throughput_replicates(vc, sc.served_e2e_ms, sc.served_tokens, rng_c),
                delta.throughput_replicates(vb, sb.served_e2e_ms, sb.served_tokens, rng_b),
            )
            ci = delta.central_interval(reps, confidence)
        else:
            ci = (math.nan, math.nan)  # summaries hold no throughput interval
        badness = (-point, -ci[1], -ci[0])
        if math.isnan(ci[0]) and abs(point) <= tol:
            badness = (-point, -point, -point)  # no interval, but the change itself is within tolerance
    else:  # a share, absolute: failed requests (worse up) or valid outputs (worse down)
        vb, vc = _num(lb.get(check)), _num(lc.get(check))
        if math.isnan(vb) or math.isnan(vc):
            return None  # valid_output_rate: a workload that asks for no structure has none
        point = vc - vb
        if sb is not None and sc is not None:
            flags_b, flags_c = (sb.failed, sc.failed) if check == ERROR_RATE else (sb.valid, sc.valid)
            reps = delta.share_replicates(flags_c, rng_c) - delta.share_replicates(flags_b, rng_b)
            ci = delta.central_interval(reps, confidence)
        else:
            ci = _approx_absolute(_pair(lb.get(f"{check}_ci")), _pair(lc.get(f"{check}_ci")), point, confidence)
        badness = (point, ci[0], ci[1]) if check == ERROR_RATE else (-point, -ci[1], -ci[0])
    verdict, may_regress = classify(badness[1], badness[2], tol)
    saturated = bool(lb.get("client_saturated") or lc.get("client_saturated"))
    contended = bool(lb.get("host_contended") or lc.get("host_contended"))
    if (saturated or contended) and verdict == "regression":
        verdict = "inconclusive"  # the numbers include the load generator's own delay, or the busy host's
    change = Change(
        check=check, kind=kind, level=conc, baseline=vb, candidate=vc, change=point, ci=ci,
        relative=kind not in ABSOLUTE, tolerance=tol, verdict=verdict, may_regress=may_regress,
        gating=rules.gates(check, kind),
    )
    change.message = describe_change(change, confidence) + untrusted_note(saturated, contended)
    return change


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _approx_relative(
    vb: float, vc: float, ci_b: tuple[float, float], ci_c: tuple[float, float], confidence: float
) -> tuple[float, float]:
    """Without records: the relative change's interval by the delta method from both intervals."""
    z = _z(confidence)
    if not all(math.isfinite(x) for x in (vb, vc, *ci_b, *ci_c)) or vb <= 0 or vc <= 0:
        return (math.nan, math.nan)
    sb, sc = (ci_b[1] - ci_b[0]) / (2 * z), (ci_c[1] - ci_c[0]) / (2 * z)
    ratio = vc / vb
    sd = ratio * math.sqrt((sb / vb) ** 2 + (sc / vc) ** 2)
    return (ratio - 1 - z * sd, ratio - 1 + z * sd)


def _approx_absolute(
    ci_b: tuple[float, float], ci_c: tuple[float, float], point: float, confidence: float
) -> tuple[float, float]:
    z = _z(confidence)
    if not all(math.isfinite(x) for x in (*ci_b, *ci_c)):
        return (math.nan, math.nan)
    sd = math.hypot((ci_b[1] - ci_b[0]) / (2 * z), (ci_c[1] - ci_c[0]) / (2 * z))
    return (point - z * sd, point + z * sd)

