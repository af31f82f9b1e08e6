"""The gate's noise threshold for all its checks at once: how far a healthy run can stray from its history.

A sweep gates a dozen checks or more (each SLO percentile, throughput and the
error rate at every level). Judging each against its own prediction interval
at 95% would alarm on about one healthy run in two; widening every interval by
Bonferroni (1 − 5%/checks) and Student's t over a handful of runs makes them
so wide that nothing is ever caught (measured: 0 of 6 mock regressions of 10%
on a drifting server, 0 of 4 real llama-server slowdowns). Both ignore what a
drifting server does: **all checks of a slow run move together**. Here the
checks are judged together, and their correlation is used, not punished.

Per check ``k`` (on the log scale for relative checks, see :mod:`noise`), with
``n`` reference runs (history plus baselines) and ``m`` candidate runs:

* ``mean_k`` and ``sd_k`` of the reference runs' values; the spread used is
  ``s_k = max(sd_k, floor_k)``, where ``floor_k`` is the runs' own within-run
  standard error (a few runs can look steadier than one run's requests allow);
* the candidate's standardized *badness* ``T_k = sign_k · (mean of the
  candidates − mean_k) / (s_k · sqrt(1/m + 1/n))`` (``sign`` = −1 for
  throughput, so worse is always positive). Its difference from the reference
  mean, not from one baseline run, is what is judged: the mean of ``n`` runs is
  a steadier yardstick than one run that drifted itself.

Two statistics, one false-alarm budget :data:`FALSE_ALARMS` (5%) for the gate:

1. **composite**: the mean of the standardized badness over the checks,
   against the same mean for each reference run (its own spread, ``n − 1``
   degrees of freedom). A real regression moves many checks the same way, and
   the composite sees it even when each check alone is within its noise. Share
   :data:`COMPOSITE_SHARE` of the budget.
2. **one check alone**: the largest single-check statistic, for a regression of
   one check only (the TTFT at the top level; fewer slots make TTFT worse and
   ITL better, and the two cancel in the composite). With at least
   :data:`MIN_FACTOR_RUNS` reference runs each check is taken *net of the
   runs' common movement*: its share ``beta_k`` of each reference run's
   composite is regressed out, and the candidate's deviation minus
   ``beta_k`` × its composite is judged against the spread that is left (a
   regression's prediction interval, ``n − 2`` degrees of freedom). On a
   drifting or shared machine most of a check's spread is the whole run moving;
   a check that moves against the others is what stands out. With fewer runs,
   its plain ``T_k``. Its threshold comes from the *joint* null of both
   statistics, so the rest of the budget is what it adds beyond the composite.

The null distribution is a **parametric bootstrap over the runs' correlation**:
each replicate draws ``n`` reference runs and ``m`` candidates from a normal
with the reference runs' sample correlation (``z = g·U/√(n−1)``, ``U`` the
runs' standardized residuals, ``g`` standard normal: a multiplier bootstrap,
which keeps the correlation without estimating a ``k × k`` matrix from a few
runs), and recomputes every mean, spread and both statistics as the gate does.
So each check's spread being estimated from few runs (the check whose ``sd``
came out small is the one the max picks) is part of the threshold, and with
one check the threshold is Student's t, with perfectly correlated checks it
is too, and with independent ones it approaches the max of independent t's.
The sample correlation of a few runs is not shrunk: in simulation (12 to 18
checks, 4 to 12 runs, correlation 0 to 0.9) the unshrunk bootstrap held the
gate at 4–7% false alarms, a shrunk one (Schäfer–Strimmer) at 2–6% but with
thresholds up to 20% wider on correlated checks, which cost detection.

A check fails the gate only when it is beyond this noise *and* worse than the
reference mean by more than its tolerance (the minimum effect a user cares
about, ``--tolerance``): its statistic alone beyond its threshold, or its plain
``T_k`` beyond the one-sided single-check t at the composite's level when the
composite says the run as a whole is worse. The gate's false alarms (some
check failing when nothing changed) stay within the budget; which checks are
named once the composite fired is the usual closed-testing trade.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import numpy as np

from loadtest.compare.joint_null import null_replicates, shrinkage
from loadtest.compare.noise import RunPoint

#: The gate's target rate of false alarms from run-to-run noise, over all checks together.
FALSE_ALARMS = 0.05
#: The share of that budget spent on the composite (the rest goes to the max of single checks).
COMPOSITE_SHARE = 0.6
#: From this many reference runs on, a check alone is judged net of the runs' common movement (below).
MIN_FACTOR_RUNS = 5
#: Replicates of the parametric bootstrap.
RESAMPLES = 4000


@dataclass(frozen=True)
class CheckNoise:
    """One check's reference runs and candidates on the noise scale, with the side that is worse."""

    reference: Sequence[RunPoint]
    candidates: Sequence[float]
    sign: float = 1.0  # +1: higher is worse (latency, error rate); −1: lower is worse (throughput)
    candidate_ses: Sequence[float] = ()  # the candidates' own within-run standard errors

    @property
    def n(self) -> int:
        return len(self.reference)

    @property
    def m(self) -> int:
        return len(self.candidates)

    @property
    def mean(self) -> float:
        return float(np.mean([p.value for p in self.reference]))

    @property
    def sd(self) -> float:
        return float(np.std([p.value for p in self.reference], ddof=1)) if self.n > 1 else math.nan

    @property
    def floor(self) -> float:
        """The reference runs' own within-run standard error (root mean square)."""
        return math.sqrt(float(np.mean([p.se ** 2 for p in self.reference]))) if self.n else 0.0

    @property
    def spread(self) -> float:
        """Run-to-run standard deviation, floored by the within-run one."""
        return max(self.sd, self.floor)

    @property
    def candidate_spread(self) -> float:
        """A candidate's spread: the run-to-run one, or its own within-run one where that is wider (a
        percentile of a few requests that one stall moved is no more certain than its interval says)."""
        own = math.sqrt(float(np.mean([se ** 2 for se in self.candidate_ses]))) if self.candidate_ses else 0.0
        return max(self.spread, own)

    @property
    def scale(self) -> float:
        """Standard deviation of (mean of the candidates − reference mean) when nothing changed."""
        return math.sqrt(self.candidate_spread ** 2 / self.m + self.spread ** 2 / self.n)

    @property
    def deviation(self) -> float:
        """Mean of the candidates − reference mean (on the noise scale; positive is higher, not worse)."""
        return float(np.mean(self.candidates)) - self.mean

    @property
    def z(self) -> float:
        """Standardized badness of the candidates (inf when the reference runs never moved at all)."""
        bad = self.sign * self.deviation
        if self.scale > 0:
            return bad / self.scale
        return 0.0 if bad == 0 else math.copysign(math.inf, bad)


#: A threshold for one check alone past this many of its standard deviations is said to be wide (a
#: real llama-server trial: ±9.5 from 5 reference runs passed a 35% TTFT rise at the top level).
WIDE_ALONE = 6.0


@dataclass(frozen=True)
class JointNoise:
    """The thresholds for one comparison's checks, and where the candidates stand."""

    checks: int  # checks in the family (those with a spread)
    runs: int  # reference runs
    max_critical: float  # a check alone is beyond the noise past this
    marginal_critical: float  # a check is beyond the noise past this when the composite is
    composite_critical: float
    composite: float  # the candidates' composite (standardized, like the critical)
    false_alarms: float
    #: Each input check's statistic alone (NaN: not in the family); factor-adjusted when ``factor``.
    alone: tuple[float, ...] = ()
    factor: bool = False
    #: Per input check, (offset, scale) of its statistic alone in badness: alone = (badness − offset) / scale.
    bands: tuple[tuple[float, float], ...] = ()
    #: For :mod:`reach` (what the gate can catch): the badness of the composite that is one unit of its
    #: statistic, each input check's weight in it (NaN: not in the family), the candidate runs, and the
    #: reference runs' standardized residuals with their shrinkage (to draw more runs like them).
    composite_scale: float = math.nan
    weights: tuple[float, ...] = ()
    #: Per input check, the scale of its statistic alone when the candidates' composite is 0 (the other
    #: checks at the reference mean); ``bands`` holds it at the observed composite, which a large common
    #: move widens in the factor model. NaN: not in the family.
    quiet_scales: tuple[float, ...] = ()
    candidates: int = 1
    residuals: np.ndarray | None = field(default=None, repr=False, compare=False)
    lam: float = 0.0

    def band_basis(self, i: int, check: CheckNoise) -> tuple[float, float]:
        """The (offset, scale) of check ``i``'s statistic alone that :meth:`band` shows.

        At the observed composite (``bands``) while the run as a whole is within the noise: there the
        band is exactly where :meth:`beyond` and :meth:`better` turn. Once the composite fired (either
        way), at a quiet run (offset 0, ``quiet_scales``): the factor model takes a common move of
        thousands of standard deviations as that much wider noise for each check alone, and a nightly
        against an unchanged history (9 runs alike within 0.5%) showed "run-to-run noise
        [÷4503599627370496, +3.3%]" beside a +26% regression. The side the run moved to still ends
        where the check turns with it (the single-check t, :meth:`band`)."""
        offset, scale = self.bands[i] if 0 <= i < len(self.bands) else (0.0, check.scale)
        quiet = self.quiet_scales[i] if 0 <= i < len(self.quiet_scales) else math.nan
        if (self.composite_fired or self.composite_better) and math.isfinite(quiet) and quiet > 0:
            return 0.0, quiet
        return offset, scale

    def band(self, i: int, check: CheckNoise) -> tuple[float, float]:
        """The badness (candidates' mean − reference mean, worse positive) between which check ``i`` is
        within the noise, as shown (``noise_ci``): where :meth:`beyond` and :meth:`better` turn true, on
        the quiet basis once the run as a whole moved (:meth:`band_basis`)."""
        offset, scale = self.band_basis(i, check)
        # a check outside the family (one --fail-on leaves out) is judged alone from its own runs: its band
        # was ±∞, printed "run-to-run noise [÷∞, ×∞]" beside a +35% change
        critical = self.max_critical if 0 <= i < len(self.alone) else alone_critical(check.n)
        hi, lo = offset + critical * scale, offset - critical * scale
        if self.composite_fired:
            hi = min(hi, self.marginal_critical * check.scale)
        if self.composite_better:
            lo = max(lo, -self.marginal_critical * check.scale)
        return lo, hi

    @property
    def composite_fired(self) -> bool:
        return self.composite > self.composite_critical

    @property
    def composite_better(self) -> bool:
        """The run as a whole is better than the noise (the same threshold on the other side)."""
        return self.composite < -self.composite_critical

    def beyond(self, i: int, z: float, runs: int = 0) -> bool:
        """Is input check ``i``, of standardized badness ``z``, beyond the noise on the worse side?

        ``runs``: the reference runs of a check outside the family (``i`` −1), judged alone by
        :func:`alone_critical`; without them it is judged by the composite only."""
        if 0 <= i < len(self.alone):
            alone_beyond = bool(self.alone[i] > self.max_critical)
        else:
            alone_beyond = runs >= 2 and z > alone_critical(runs)
        return alone_beyond or (self.composite_fired and z > self.marginal_critical)

    def better(self, i: int, z: float, runs: int = 0) -> bool:
        """… or on the better side (the bootstrap is symmetric: the same thresholds)."""
        if 0 <= i < len(self.alone):
            alone_better = bool(self.alone[i] < -self.max_critical)
        else:
            alone_better = runs >= 2 and z < -alone_critical(runs)
        return alone_better or (self.composite_better and z < -self.marginal_critical)

    def confidence(self) -> float:
        """The two-sided level of one check's Student-t interval as wide as the max threshold."""
        # scipy: start-up time, only when a gate judges against a history
        from scipy.stats import t as student_t

        return float(1.0 - 2.0 * student_t.sf(self.max_critical, max(1, self.runs - 1)))

    def describe(self, wide_words: bool = True) -> str:
        """The noise line; ``wide_words``: say that a wide single-check threshold asks more runs (off when
        :mod:`reach` says what the gate can catch in figures)."""
        composite = (f"composite {self.composite:+.1f} (beyond ±{self.composite_critical:.1f} means the run as a whole "
                     "moved)" if math.isfinite(self.composite) and math.isfinite(self.composite_critical)
                     else "no composite (the reference runs never moved together)")  # read "composite +nan"
        return (f"run-to-run noise from {self.runs} reference runs, {self.checks} checks judged together: "
                f"{composite}, one check beyond ±{self.max_critical:.1f} alone; {self.false_alarms:.0%} false alarms"
                + (f"; with {self.runs} runs one check must stray far to fail alone, and more reference runs "
                   f"(--history) narrow that" if wide_words and self.max_critical > WIDE_ALONE else ""))


def alone_critical(runs: int, false_alarms: float = FALSE_ALARMS) -> float:
    """Student's t at both sides of ``false_alarms`` with ``runs − 1`` degrees of freedom: the threshold for a
    check judged alone from its own ``runs`` reference runs (one that ``--fail-on`` leaves out of the family;
    it fails nothing, but its verdict and band are shown)."""
    # scipy: start-up time, only when a gate judges against a history
    from scipy.stats import t as student_t

    return float(student_t.ppf(1.0 - false_alarms / 2, max(1, runs - 1)))


def calibrate(checks: Sequence[CheckNoise], rng: np.random.Generator, *, false_alarms: float = FALSE_ALARMS,
              composite_share: float = COMPOSITE_SHARE, resamples: int = RESAMPLES) -> JointNoise | None:
    """The joint thresholds for ``checks`` (each with at least 2 reference runs and a spread), or None.

    ``JointNoise.alone[i]`` is the single-check statistic of ``checks[i]`` (NaN when not in the family).
    """
    index = [i for i, c in enumerate(checks) if c.n >= 2 and c.m >= 1 and c.spread > 0 and math.isfinite(c.spread)]
    family = [checks[i] for i in index]
    if not family:
        return None
    folders = sorted({p.folder for c in family for p in c.reference})
    row = {f: i for i, f in enumerate(folders)}
    n, m, k = len(folders), max(c.m for c in family), len(family)
    # residuals of the reference runs, badness-signed; a run missing a check adds nothing to it
    resid = np.zeros((n, k))
    for j, c in enumerate(family):
        for p in c.reference:
            resid[row[p.folder], j] = c.sign * (p.value - c.mean)
    sds = np.array([(c.sd if c.sd > 0 else c.spread) * math.sqrt(max(1, c.n - 1) / max(1, n - 1)) for c in family])
    u = resid / sds  # standardized: unit variance over the n rows
    factor = n >= MIN_FACTOR_RUNS
    seen = _observed(family, resid, factor)
    composite, alone = seen.composite, seen.alone
    lam = shrinkage(u)
    comp_null, max_null = null_replicates(u, n, m, rng, resamples, lam, factor)
    alpha_c = false_alarms * composite_share
    comp_crit = float(np.quantile(comp_null, 1.0 - alpha_c))
    # the max's threshold: what it may add to the composite's false alarms, from the same replicates
    rest = max_null[comp_null <= comp_crit]
    allowed = int(math.floor((false_alarms - alpha_c) * resamples))
    ordered = np.sort(rest)[::-1]
    max_crit = float(ordered[allowed]) if allowed < len(ordered) else float(ordered[-1])
    # scipy: start-up time, only when a gate judges against a history
    from scipy.stats import t as student_t

    marginal = float(student_t.ppf(1.0 - alpha_c, max(1, n - 1)))
    per_input = [math.nan] * len(checks)
    bands = [(0.0, c.scale) for c in checks]
    weight = [math.nan] * len(checks)
    quiet = [math.nan] * len(checks)
    for j, i in enumerate(index):
        per_input[i] = float(alone[j])
        bands[i] = (float(seen.offsets[j]), float(seen.scales[j]))
        weight[i] = float(seen.weights[j])
        quiet[i] = float(seen.quiet[j])
    return JointNoise(k, n, max_crit, marginal, comp_crit, composite, false_alarms, tuple(per_input), factor,
                      tuple(bands), composite_scale=seen.comp_scale, weights=tuple(weight), quiet_scales=tuple(quiet),
                      candidates=m, residuals=u, lam=lam)


class _Observed(NamedTuple):
    """Where the candidates stand (:func:`_observed`)."""

    composite: float  # a t statistic
    alone: np.ndarray  # each check's statistic alone
    offsets: np.ndarray  # alone = (badness − offset) / scale
    scales: np.ndarray
    comp_scale: float  # the composite's badness per unit of its statistic
    weights: np.ndarray  # each check's weight in the composite
    quiet: np.ndarray  # each check's scale alone were the composite 0


def _observed(family: Sequence[CheckNoise], resid: np.ndarray, factor: bool) -> _Observed:
    """The candidates' composite, each check's statistic alone (factor-adjusted when ``factor``, else its
    plain standardized badness) with its offset and scale in badness, and the composite's scale and weights."""
    n, m = resid.shape[0], max(c.m for c in family)
    weights = np.array([1.0 / c.candidate_spread for c in family])
    weights /= weights.sum()
    bad = np.array([c.sign * c.deviation for c in family])
    per_run = resid @ weights  # each reference run's composite, with the same weights
    f_c = float(bad @ weights)
    sd = float(np.std(per_run, ddof=1)) if n > 1 else math.nan
    comp_scale = sd * math.sqrt(1.0 / m + 1.0 / n) if sd > 0 else math.nan
    composite = f_c / comp_scale if sd > 0 else math.nan
    if not factor or not sd > 0:
        plain = np.array([c.scale for c in family])
        return _Observed(composite, np.array([c.z for c in family]), np.zeros(len(family)), plain, comp_scale,
                         weights, plain)
    ss = float((per_run ** 2).sum())
    beta = resid.T @ per_run / ss  # each check's share of the run's common movement
    left = resid - np.outer(per_run, beta)
    sd_left = np.sqrt((left ** 2).sum(axis=0) / (n - 2))
    sd_left = np.maximum(sd_left, [c.floor for c in family])
    own = np.array([max(s, c.candidate_spread if c.candidate_ses else 0.0) for s, c in zip(sd_left, family)])
    own = np.maximum(own, sd_left)
    scale = np.sqrt(own ** 2 / m + sd_left ** 2 * (1.0 / n + f_c ** 2 / ss))
    with np.errstate(divide="ignore", invalid="ignore"):
        alone = np.where(scale > 0, (bad - beta * f_c) / scale, 0.0)
    quiet = np.sqrt(own ** 2 / m + sd_left ** 2 / n)
    return _Observed(composite, alone, beta * f_c, scale, comp_scale, weights, quiet)
