"""Run-to-run noise: how far a healthy server moves from one run to the next, from a history of runs.

The within-run interval of a change (requests and time blocks resampled, see
:mod:`delta`) is right about *one* run: it says nothing of warm-up, caches,
CPU frequency, scheduling or neighbours, which move every real server from
run to run. Here the runs of the same workload fingerprint measured before
(the *reference* runs: the history plus the baselines) say how much.

Per check and level, each reference run contributes one value (its summary's
point) and its own within-run spread (from its summary's interval, the time
block bootstrap of the analyzer); :mod:`joint` turns them into the gate's
thresholds for all checks at once. Relative checks (latency percentiles,
throughput) work on the log of the value, so a 10% slowdown is the same size at
every level; the error rate works in absolute points.

An earlier version judged each check alone: a hierarchical bootstrap (runs,
then each run's within-run interval) of the difference of one baseline and one
candidate, at a per-check level of 1 − 2 × 5% / checks with a Student-t tail.
With a dozen checks and a handful of runs that interval was so wide that the
gate caught nothing (0 of 6 mock regressions of 10% on a drifting server); see
:mod:`joint` for what replaced it and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from loadtest.compare.level_keys import LevelKey, level_key
from loadtest.compare.rules import COMPLETED_SHARE
from loadtest.compare.summary_values import check_value, completed_share, scoped
from loadtest.compare.summary_values import num as _num, pair as _pair  # one reading of a summary's numbers

if TYPE_CHECKING:
    from loadtest.compare.change import Change

#: Fewer reference runs than this and the run-to-run noise is unknown.
MIN_HISTORY_RUNS = 3
#: Without known run-to-run noise, a rate's (error or valid output: ``rules.ABSOLUTE``) regression
#: needs a change beyond this many tolerances (a change the within-run interval calls certain but
#: that barely passes the tolerance is inconclusive). A latency or throughput change is then
#: inconclusive whatever its size: see :mod:`loadtest.compare.groups`.
UNKNOWN_NOISE_FACTOR = 2.0
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
    trials: int = 0  # the requests behind a rate (its binomial's n); 0 for the other checks


def rate_se(rate: float, trials: int, confidence: float) -> float:
    """The standard error a rate of ``trials`` requests has when its true value is ``rate``: the Wilson
    interval's half-width over z (at 0 it is z / (2 (n + z²)), the width a run of no failures reports).

    A candidate's rate is judged against the noise it would show if nothing had changed, that is at
    the reference runs' rate. Its own interval is the wrong yardstick: a binomial's spread grows with
    the rate, so 10 failures of 100 against clean references (0 of 500) carried an interval of
    ±6 points, which put the change within the noise (a z of 3 against a threshold of 6).
    """
    if trials <= 0 or not math.isfinite(rate):
        return math.nan
    p = min(1.0, max(0.0, rate))
    z = z_of(confidence)
    z2n = z * z / trials
    half = z * math.sqrt(p * (1.0 - p) / trials + z * z / (4.0 * trials * trials)) / (1.0 + z2n)
    return half / z


def completed_share_se(level: Mapping[str, Any], confidence: float) -> float:
    """A rate level's completed share's standard error on the log scale, from its counts: the level's
    sends (``open_loop.sent``), each completed in step or not, at the share observed (a share past 1,
    a span's edge effect, counts as 1): :func:`rate_se` of the share not completed, over the share.

    Why a count's, not a resampling or the runs' spread alone: the summary holds no interval for it,
    and a seeded arrival schedule sends the same requests in every run, so a healthy server's share
    came out alike to 0.01% in four runs (1.087 at 4 req/s in each, against the mock) and a
    candidate's +4% (its longer lives moved the span's edges) stood thousands of spreads from them:
    the composite of all checks read −3250, "the run as a whole moved better", and held back a +90%
    ITL at 8 req/s as within noise. A
    count of 23 sends is known to about one send in 23 (the Wilson interval at the boundary, ±3.7%
    at 1 σ), and that is the floor. NaN without sends.
    """
    share = completed_share(level)
    sent = _num((level.get("open_loop") or {}).get("sent"))
    if not (math.isfinite(share) and share > 0 and math.isfinite(sent) and sent > 0):
        return math.nan
    return rate_se(1.0 - share, int(sent), confidence) / min(share, 1.0)


def z_of(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def run_point(summary: Mapping[str, Any], check: str, kind: str, level: LevelKey, confidence: float,
              folder: str = "") -> RunPoint | None:
    """The run's value of ``check`` at the level keyed ``level`` (users, or a rate's req/s or speedup:
    :mod:`level_keys`), from its summary.json, or None.

    None when the level was not measured, the value is missing or not finite (a
    percentile reached by failures), or a relative value is not positive.
    """
    lv = _level(summary, level)
    if lv is None:
        return None
    z = z_of(float(summary.get("confidence") or confidence))
    if kind == "latency":
        own, plain = scoped(lv, check)  # a request class's check: its entry at the level
        metric, _, pct = plain.partition(".")
        stats = own.get(metric) or {}
        value = _num(stats.get(pct))
        ci = _pair(((stats.get("ci") or {}).get(pct)))
    elif check == COMPLETED_SHARE:  # a rate level's throughput: its counts' standard error (above)
        value = check_value(lv, check)
        if not math.isfinite(value) or value <= 0:
            return None
        se = completed_share_se(lv, float(summary.get("confidence") or confidence))
        return RunPoint(math.log(value), se if math.isfinite(se) else 0.0, folder)
    elif kind == "throughput":  # output tokens/s: a summary keeps no interval for it
        value, ci = check_value(lv, check), (math.nan, math.nan)
    elif kind in ("error_rate", "valid_output_rate"):  # absolute rates, each with its Wilson interval
        value = _num(lv.get(kind))
        ci = _pair(lv.get(f"{kind}_ci"))
        if not math.isfinite(value):
            return None
        se = (ci[1] - ci[0]) / (2 * z) if all(math.isfinite(c) for c in ci) else 0.0
        trials = _num(lv.get("requests" if kind == "error_rate" else "valid_output_checked"))
        return RunPoint(value, max(se, 0.0), folder, int(trials) if math.isfinite(trials) and trials > 0 else 0)
    else:
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    se = 0.0
    if all(math.isfinite(c) and c > 0 for c in ci) and ci[1] >= ci[0]:
        se = (math.log(ci[1]) - math.log(ci[0])) / (2 * z)
    return RunPoint(math.log(value), se, folder)


def candidate_ses(candidates: Sequence[RunPoint], reference: Sequence[RunPoint], confidence: float) -> list[float]:
    """Each candidate's within-run standard error as the noise judges it.

    A latency or throughput keeps its own. A rate (failed requests, valid outputs) takes the error it
    would have at the reference runs' mean rate (:func:`rate_se`), not its own: its own grows with the
    change being judged, and hid 0 → 10% failures within the run-to-run noise.
    """
    if not reference or not all(p.trials for p in candidates):
        return [p.se for p in candidates]
    rate = float(np.mean([p.value for p in reference]))
    return [rate_se(rate, p.trials, confidence) for p in candidates]


def group_change(base: Sequence[RunPoint], cand: Sequence[RunPoint], confidence: float) -> tuple[float, tuple[float, float]]:
    """The change of the group means and its within-run interval (each run's own spread only).

    No interval (NaN) when a run has none (``se`` 0: a summary keeps no throughput interval):
    summing those zeros gave a point, "+13.5% [+13.5%, +13.5%]", a certainty nothing measured.
    """
    z = z_of(confidence)
    d = float(np.mean([p.value for p in cand]) - np.mean([p.value for p in base]))
    if any(not p.se > 0 for p in (*base, *cand)):
        return d, (math.nan, math.nan)
    var = sum(p.se ** 2 for p in base) / len(base) ** 2 + sum(p.se ** 2 for p in cand) / len(cand) ** 2
    half = z * math.sqrt(var)
    return d, (d - half, d + half)


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


def fmt_band_end(x: float | None, relative: bool = True) -> str:
    """One end of a run-to-run band: ``+37.8%``, or past a doubling (or a halving) a factor, ``×12.3``
    (``÷12.8``).

    Why factors: the noise is modelled on the log of the value, so its band is symmetric there around
    the reference mean, and in percent a band of ±2.5 on the log scale reads "[-92.2%, +1132.9%]"
    (or throughput's "[-10.9%, +1581.5%]"), whose two ends look unrelated and whose far end is no
    figure anyone can use. As factors it reads "[÷12.8, ×12.3]": the same width both ways.
    """
    if x is None or math.isnan(x):
        return "?"
    if not relative:
        return f"{x * 100:+.1f} pp"
    if math.isinf(x) or x >= 1.0:
        return "×∞" if math.isinf(x) else f"×{1.0 + x:.1f}"
    if x <= -0.5:
        return "÷∞" if x <= -1.0 else f"÷{1.0 / (1.0 + x):.1f}"
    return f"{x * 100:+.1f}%"


def fmt_band(ci: Sequence[float | None] | None, relative: bool = True) -> str:
    """``[-20.4%, +37.8%]``, ``[÷12.8, ×12.3]`` (:func:`fmt_band_end`); ``–`` when not known."""
    if ci is None or any(x is None or math.isnan(x) for x in ci):
        return "–"
    return f"[{fmt_band_end(ci[0], relative)}, {fmt_band_end(ci[1], relative)}]"


def _level(summary: Mapping[str, Any], level: LevelKey) -> Mapping[str, Any] | None:
    best = None
    for lv in summary.get("levels") or []:
        if level_key(lv) == level and lv.get("status") != "no_data":
            if best is None or (lv.get("requests") or 0) > (best.get("requests") or 0):
                best = lv
    return best


def history_hint(changes: Sequence[Change], reference_runs: int, min_history: int, unknown: bool) -> str | None:
    """What an inconclusive headline says when too few reference runs left the run-to-run noise unknown.

    ``unknown``: a check was held only for that (a speed's change beyond the tolerance, or a
    rate's not beyond twice it). Otherwise a held level check judged without that noise (its within-run interval straddles
    the tolerance) could be decided by longer levels, or by the history, which judges it against
    the noise instead: the headline names both and how many runs are missing, as gate.md says.
    The runs counted are those that measured the held checks' levels: a level that only some
    reference runs measured (a refine probe, a level cut short) is unknown with all of them given.
    None: the default hint stands.
    """
    held = [c.noise_runs for c in changes if c.holds_gate and c.noise == "unknown" and c.level is not None]
    measured = min(held, default=reference_runs)
    if unknown and measured < reference_runs:
        return (f"run-to-run noise is unknown where only {measured} of the {reference_runs} reference runs measured "
                f"the level: give --history with at least {max(min_history - measured, 1)} more run(s) of this "
                f"workload that measure it")
    need = max(min_history - reference_runs, 1)
    if unknown:
        return (f"run-to-run noise is unknown with {reference_runs} reference run(s): give --history with at least "
                f"{need} more run(s) of this workload")
    if reference_runs < min_history and any(c.holds_gate and c.noise == "unknown" for c in changes):
        return (f"longer levels would decide, or --history with at least {need} more run(s) of this workload "
                f"({reference_runs} reference run(s), {min_history} needed to judge by the run-to-run noise)")
    return None


def noise_words(change: Change, min_history: int, unknown: bool, relative: bool) -> str:
    """The message's words on the noise: both intervals side by side, or what is missing to know it."""
    unit = "%" if relative else " pp"

    def pct(x: float | None) -> str:
        return "?" if x is None or math.isnan(x) else f"{x * 100:+.1f}{unit}"

    if change.noise == "history" and change.noise_ci is not None:
        return (f"; {within_words(change, pct)}run-to-run noise {fmt_band(change.noise_ci, relative)} "
                f"from {change.noise_runs} runs")
    if unknown:
        return unknown_noise_words(unknown_noise_reason(change, min_history))
    return ""


def within_words(change: Change, pct: Any) -> str:
    """``within-run [+53.9%, +64.8%], ``; with none (a throughput read from summaries: the message's
    :func:`~loadtest.compare.change.no_interval_words` said why), not "[?, ?]"."""
    w = change.within_ci or (math.nan, math.nan)
    if all(x is None or math.isnan(x) for x in w):
        return ""
    return f"within-run [{pct(w[0])}, {pct(w[1])}], "


def unknown_noise_reason(change: Change, min_history: int) -> str:
    """Why the run-to-run noise is unknown for ``change``, and what ``--history`` needs."""
    need = max(min_history - change.noise_runs, 1)
    return f"{change.noise_runs} reference run(s) of this workload, {min_history} needed: add --history with {need} more"


def unknown_noise_words(reason: str) -> str:
    """The message's words when the noise is unknown (the terminal finds them by this, to say them once)."""
    return f"; inconclusive: run-to-run noise unknown ({reason})"
