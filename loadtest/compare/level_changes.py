"""Per level and per check: the change between the runs, its interval and its verdict.

With records on both sides the interval is a bootstrap of the requests (see
:mod:`delta`), each run's replicates drawn from its own samples, one run at a
time (see :mod:`draws`); without, it is approximated from the summaries' own
intervals by the delta method. A level where either run's load generator was
saturated or its host busy cannot prove a regression, unless the client was quiet
and the change is larger than its measured timing error (:mod:`client_trust`).

Levels are matched by their key (:mod:`level_keys`): users in a closed loop, the nominal rate in an
open loop, the speedup in a trace replay. At a rate level the throughput check is the completed
share (:func:`summary_values.completed_share`), not the output tokens/s the client's schedule sets.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Callable, Mapping

import numpy as np

from loadtest.compare import delta
from loadtest.compare.change import Change, classify, describe_change, untrusted_note, worse_sign
from loadtest.compare.client_trust import client_explains
from loadtest.compare.draws import draw_run, plan, values
from loadtest.compare.level_keys import USERS, LevelKey, load_list
from loadtest.compare.noise import completed_share_se
from loadtest.compare.rules import ABSOLUTE, COMPLETED_SHARE, ERROR_RATE, THROUGHPUT, VALID_OUTPUT, Rules, check_kind
from loadtest.compare.samples import LevelSamples
from loadtest.compare.stationarity import hold_drifting
from loadtest.compare.summary_values import ci as _ci
from loadtest.compare.summary_values import levels_by_key, scoped
from loadtest.compare.summary_values import pair as _pair


def level_changes(
    side_b: Any,
    side_c: Any,
    samples_b: Callable[[], dict[LevelKey, LevelSamples]] | None,
    samples_c: Callable[[], dict[LevelKey, LevelSamples]] | None,
    latency_checks: list[str],
    rules: Rules,
    confidence: float,
    seed: int,
    warnings: list[str],
) -> list[Change]:
    """Every check's change at every level both runs measured.

    ``samples_b`` / ``samples_c`` make a run's bootstrap samples when called
    (None: the run has no records); they are called one after the other, and
    each run's samples are dropped once its replicates are drawn. ``side_c.unit`` names the levels.
    """
    unit = side_c.unit
    levels_b = levels_by_key(side_b.summary)
    levels_c = levels_by_key(side_c.summary)
    common = sorted(set(levels_b) & set(levels_c))
    only = sorted(set(levels_b) ^ set(levels_c))
    if only:
        warnings.append(
            "levels measured by one run only are not compared: "
            + (", ".join(str(c) for c in only) if unit == USERS else load_list(only, unit))
        )
    flagged = {c: [lv for lv in (levels_b[c], levels_c[c]) if lv.get("client_saturated")] for c in common}
    near = [c for c, lvs in flagged.items() if lvs and all(lv.get("client_near_limit") for lv in lvs)]
    saturated = [c for c, lvs in flagged.items() if lvs and c not in near]
    if saturated:
        warnings.append(
            "the load generator was saturated at " + load_list(saturated, unit)
            + " in at least one run: changes there may be the client's, not the server's"
        )
    if near:
        warnings.append(
            "a verdict sat within the quiet load generator's timing error of its limit at "
            + load_list(near, unit) + " in at least one run: only changes larger than that "
            "error are judged there"
        )
    contended = [c for c in common if levels_b[c].get("host_contended") or levels_c[c].get("host_contended")]
    if contended:
        warnings.append(
            "the host running the load generator was busy with other work at " + load_list(contended, unit)
            + " in at least one run: changes there may be the host's, not the server's"
        )
    # at a rate the tokens/s follow the client's schedule: the server's throughput there is the completed share
    checks = latency_checks + [THROUGHPUT if unit == USERS else COMPLETED_SHARE, ERROR_RATE, VALID_OUTPUT]
    judged = plan(levels_b, levels_c, common, checks)
    draws_b = draw_run(samples_b, levels_b, judged, "baseline", seed)
    draws_c = draw_run(samples_c, levels_c, judged, "candidate", seed)
    out: list[Change] = []
    for conc in common:
        lb, lc = levels_b[conc], levels_c[conc]
        db, dc = draws_b.get(conc), draws_c.get(conc)
        for check in checks:
            change = _level_change(check, conc, lb, lc, db, dc, rules, confidence, unit)
            if change is not None:
                hold_drifting(change, {**side_b.drifting, **side_c.drifting})
                out.append(change)
    return out


def _level_change(
    check: str,
    conc: LevelKey,
    lb: Mapping[str, Any],
    lc: Mapping[str, Any],
    db: Mapping[str, np.ndarray] | None,
    dc: Mapping[str, np.ndarray] | None,
    rules: Rules,
    confidence: float,
    unit: str = USERS,
) -> Change | None:
    """One check's change at one level; ``db`` / ``dc``: each run's replicates at the level (None: no records)."""
    kind = check_kind(check)
    tol = rules.tolerance_for(check)
    figures = values(check, lb, lc)
    if figures is None:  # a metric without samples in one run (e.g. TPOT of one-token replies), or
        return None  # valid_output_rate of a workload that asks for no structure
    vb, vc = figures
    # a request class's check is not drawn from the records (draws.plan): its summaries' intervals give its own
    drawn = db is not None and dc is not None and check in db and check in dc
    if check == COMPLETED_SHARE:  # its counts' interval, with or without records (noise.completed_share_se)
        point = float(delta.relative_change(vc, vb))
        ci = _count_interval(vb, vc, completed_share_se(lb, confidence), completed_share_se(lc, confidence), confidence)
    elif kind in ABSOLUTE:  # a share, absolute: failed requests or valid outputs
        point = vc - vb
        if drawn:
            ci = delta.central_interval(dc[check] - db[check], confidence)
        else:
            ci = _approx_absolute(_pair(lb.get(f"{check}_ci")), _pair(lc.get(f"{check}_ci")), point, confidence)
    else:  # relative: a latency percentile or the throughput
        point = float(delta.relative_change(vc, vb))
        if drawn:
            ci = delta.central_interval(delta.relative_change(dc[check], db[check]), confidence)
        elif kind == "latency":
            (own_b, plain), (own_c, _) = scoped(lb, check), scoped(lc, check)
            metric, _, pct = plain.partition(".")
            ci = _approx_relative(vb, vc, _ci(own_b, metric, pct), _ci(own_c, metric, pct), confidence)
        else:
            ci = (math.nan, math.nan)  # summaries hold no throughput (nor completed share) interval
    # badness: the change oriented so that worse is positive (change.worse_sign), with its interval
    badness = (point, ci[0], ci[1]) if worse_sign(kind) > 0 else (-point, -ci[1], -ci[0])
    if kind == "throughput" and math.isnan(ci[0]) and abs(point) <= tol:
        badness = (badness[0],) * 3  # no interval, but the change itself is within tolerance
    verdict, may_regress = classify(badness[1], badness[2], tol)
    saturated, trusted_note = client_explains((lb, lc), check, kind, vc - vb)
    contended = bool(lb.get("host_contended") or lc.get("host_contended"))
    if (saturated or contended) and verdict == "regression":
        verdict = "inconclusive"  # the numbers include the load generator's own delay, or the busy host's
    change = Change(
        check=check, kind=kind, level=conc, baseline=vb, candidate=vc, change=point, ci=ci,
        relative=kind not in ABSOLUTE, tolerance=tol, verdict=verdict, may_regress=may_regress,
        gating=rules.gates(check, kind), unit=unit,
    )
    change.message = describe_change(change, confidence) + untrusted_note(saturated, contended, trusted_note)
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


def _count_interval(vb: float, vc: float, se_b: float, se_c: float, confidence: float) -> tuple[float, float]:
    """The relative change's interval from both runs' standard errors on the log scale (a count's)."""
    if not all(math.isfinite(x) for x in (vb, vc, se_b, se_c)) or vb <= 0 or vc <= 0:
        return (math.nan, math.nan)
    d, half = math.log(vc / vb), _z(confidence) * math.hypot(se_b, se_c)
    return (math.expm1(d - half), math.expm1(d + half))


def _approx_absolute(
    ci_b: tuple[float, float], ci_c: tuple[float, float], point: float, confidence: float
) -> tuple[float, float]:
    z = _z(confidence)
    if not all(math.isfinite(x) for x in (*ci_b, *ci_c)):
        return (math.nan, math.nan)
    sd = math.hypot((ci_b[1] - ci_b[0]) / (2 * z), (ci_c[1] - ci_c[0]) / (2 * z))
    return (point - z * sd, point + z * sd)

