"""Run-to-run noise: how far a healthy server moves from one run to the next, from a history of runs.

The within-run interval of a change (requests and time blocks resampled, see
:mod:`delta`) is right about *one* run: it says nothing of warm-up, caches,
CPU frequency, scheduling or neighbours, which move every real server from
run to run. Here the runs of the same workload fingerprint measured before
(the *reference* runs: the history plus the baselines) say how much.

Per check and level, each reference run contributes one value (its summary's
point) and its own within-run spread (from its summary's interval, the time
block bootstrap of the analyzer). The gate's question is: if nothing changed,
how far could the mean of ``m_c`` candidate runs fall from the mean of ``m_b``
baseline runs? A **hierarchical bootstrap** answers it:

1. *runs*: draw ``n`` reference runs with replacement (their deviations from
   the reference mean scaled by ``sqrt(n / (n - 1))``, the usual small-sample
   correction, so three runs do not look steadier than they are);
2. *time blocks within a run*: each drawn run's value is redrawn from its own
   within-run interval (a normal draw with the interval's spread, since a
   summary keeps the interval, not the blocks);
3. the ``m_b`` "baseline" and ``m_c`` "candidate" values are drawn from that
   resampled population, and their difference of means is one replicate.

The central interval of the replicates is the **prediction interval** of the
change under no change (``noise_ci``), widened where needed to the replicates'
mean ± Student's t (n − 1 degrees of freedom) × their standard deviation: a
percentile of resampled runs cannot reach past the runs seen, and the gate asks
for ends (1 − 2 × 5% / checks, see :func:`family_confidence`) that a handful of
runs only reaches with the t distribution's tail. Relative checks (latency percentiles,
throughput) work on the log of the value, so a 10% slowdown is the same size at
every level; the error rate works in absolute points.

With history, a change is a regression only when it is beyond the tolerance
(its within-run interval says so, as without history) *and* outside that
prediction interval: a change that a healthy server shows from run to run is
``unchanged``, whatever one run's interval says (see :mod:`groups`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Mapping, Sequence

import numpy as np

from loadtest.compare.summary_values import num as _num, pair as _pair  # one reading of a summary's numbers

#: Fewer reference runs than this and the run-to-run noise is unknown.
MIN_HISTORY_RUNS = 3
#: Without known run-to-run noise, a regression needs a change beyond this many tolerances
#: (a change the within-run interval calls certain but that barely passes the tolerance is inconclusive).
UNKNOWN_NOISE_FACTOR = 2.0
#: The gate's target rate of false alarms from run-to-run noise, over all its checks together: each
#: check's prediction interval is drawn at 1 − 2 × this / (number of gated level checks), so that a
#: healthy server crosses the worse end of some check in at most this share of comparisons
#: (Bonferroni: a sweep has a dozen checks, and a 95% interval each would alarm on ~1 pair in 5).
FAMILY_FALSE_ALARMS = 0.05
#: Replicates of the hierarchical bootstrap.
NOISE_RESAMPLES = 8000
#: At most this many reference runs, the newest (an old series may describe an older server).
MAX_REFERENCE_RUNS = 30


@dataclass(frozen=True)
class RunPoint:
    """One run's value of one check at one level, on the scale the noise is modelled on.

    ``value`` is the log of the metric for relative checks and the metric itself for the error
    rate; ``se`` is the within-run standard error on that scale (0 when the summary holds no
    interval, e.g. throughput).
    """

    value: float
    se: float
    folder: str = ""


def family_confidence(checks: int, false_alarms: float = FAMILY_FALSE_ALARMS) -> float:
    """The two-sided level of each check's prediction interval for ``checks`` gated checks."""
    return 1.0 - 2.0 * false_alarms / max(1, checks)


def z_of(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def run_point(summary: Mapping[str, Any], check: str, kind: str, level: int, confidence: float,
              folder: str = "") -> RunPoint | None:
    """The run's value of ``check`` at concurrency ``level`` (from its summary.json), or None.

    None when the level was not measured, the value is missing or not finite (a
    percentile reached by failures), or a relative value is not positive.
    """
    lv = _level(summary, level)
    if lv is None:
        return None
    z = z_of(float(summary.get("confidence") or confidence))
    if kind == "latency":
        metric, _, pct = check.partition(".")
        stats = lv.get(metric) or {}
        value = _num(stats.get(pct))
        ci = _pair(((stats.get("ci") or {}).get(pct)))
    elif kind == "throughput":
        value, ci = _num(lv.get(check)), (math.nan, math.nan)
    elif kind == "error_rate":
        value = _num(lv.get("error_rate"))
        ci = _pair(lv.get("error_rate_ci"))
        if not math.isfinite(value):
            return None
        se = (ci[1] - ci[0]) / (2 * z) if all(math.isfinite(c) for c in ci) else 0.0
        return RunPoint(value, max(se, 0.0), folder)
    else:
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    se = 0.0
    if all(math.isfinite(c) and c > 0 for c in ci) and ci[1] >= ci[0]:
        se = (math.log(ci[1]) - math.log(ci[0])) / (2 * z)
    return RunPoint(math.log(value), se, folder)


def group_change(base: Sequence[RunPoint], cand: Sequence[RunPoint], confidence: float) -> tuple[float, tuple[float, float]]:
    """The change of the group means and its within-run interval (each run's own spread only)."""
    z = z_of(confidence)
    d = float(np.mean([p.value for p in cand]) - np.mean([p.value for p in base]))
    var = sum(p.se ** 2 for p in base) / len(base) ** 2 + sum(p.se ** 2 for p in cand) / len(cand) ** 2
    half = z * math.sqrt(var)
    return d, (d - half, d + half)


def null_interval(reference: Sequence[RunPoint], m_base: int, m_cand: int, confidence: float,
                  rng: np.random.Generator, resamples: int = NOISE_RESAMPLES) -> tuple[float, float]:
    """The prediction interval of (mean of ``m_cand`` runs − mean of ``m_base`` runs) when nothing
    changed, by the hierarchical bootstrap of the module doc. Needs at least 2 reference runs."""
    values = np.array([p.value for p in reference], dtype=float)
    ses = np.array([p.se for p in reference], dtype=float)
    n = len(values)
    if n < 2:
        return (math.nan, math.nan)
    centre = values.mean()
    inflated = centre + (values - centre) * math.sqrt(n / (n - 1))
    # stage 1: runs
    pick = rng.integers(0, n, size=(resamples, n))
    pop_values, pop_ses = inflated[pick], ses[pick]
    # stage 3 draws from the resampled population, stage 2 redraws each drawn run within its interval
    def draw(m: int) -> np.ndarray:
        idx = rng.integers(0, n, size=(resamples, m))
        rows = np.arange(resamples)[:, None]
        chosen = pop_values[rows, idx] + pop_ses[rows, idx] * rng.standard_normal((resamples, m))
        return chosen.mean(axis=1)

    diff = draw(m_cand) - draw(m_base)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(diff, [alpha, 1.0 - alpha])
    # A percentile of resampled runs cannot reach past the runs seen: with n runs a 99% end is only
    # the widest gap among them. The replicates' spread with Student's t on n − 1 degrees of freedom
    # gives the tail that n runs can claim; the wider of the two is the interval.
    from scipy.stats import t as student_t

    half = float(student_t.ppf(1.0 - alpha, n - 1)) * float(np.std(diff, ddof=1))
    centre_d = float(np.mean(diff))
    return min(float(lo), centre_d - half), max(float(hi), centre_d + half)


def run_to_run_sd(reference: Sequence[RunPoint]) -> float:
    """The spread of the reference runs' values (sample standard deviation; NaN with fewer than 2)."""
    if len(reference) < 2:
        return math.nan
    return float(np.std([p.value for p in reference], ddof=1))


def to_relative(x: float) -> float:
    """A log-scale change as a relative one (``+0.1`` → ``+10.5%``)."""
    if math.isnan(x):
        return math.nan
    if x > 700:
        return math.inf
    return math.exp(x) - 1.0


def to_log(x: float) -> float:
    """A relative change on the log scale (``−100%`` → −inf)."""
    if math.isnan(x):
        return math.nan
    return math.log1p(x) if x > -1.0 else -math.inf


def fmt_interval(ci: Sequence[float | None] | None, relative: bool = True) -> str:
    """``[-3.1%, +4.0%]`` (pp for the error rate); ``–`` when not known."""
    if ci is None or any(x is None or math.isnan(x) for x in ci):
        return "–"
    unit = "%" if relative else " pp"
    return f"[{ci[0] * 100:+.1f}{unit}, {ci[1] * 100:+.1f}{unit}]"  # type: ignore[operator]


def _level(summary: Mapping[str, Any], level: int) -> Mapping[str, Any] | None:
    best = None
    for lv in summary.get("levels") or []:
        if lv.get("concurrency") == level and lv.get("status") != "no_data":
            if best is None or (lv.get("requests") or 0) > (best.get("requests") or 0):
                best = lv
    return best
