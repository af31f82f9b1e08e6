"""What the gate can catch with the reference runs it has, and how many runs would bring that near the tolerance.

With a few reference runs the run-to-run noise is wide, and a change far past the tolerance is still
within it: a real llama-server judged against 3 runs called ITL p95 +57% "unchanged", and no check
could have failed short of about a tenfold change (bands of ÷12.8 … ×12.3). Each check's message
says where its band turns; the gate as a whole owes one line that says, from the same thresholds,
the smallest change that would have failed it, because "more reference runs narrow it" does not tell
a user that the gate, as it stands, cannot catch anything realistic.

Read from :class:`joint.JointNoise` (all on the log scale, badness: worse positive), for the gated
latency and throughput checks (rates are counted in points, and a slowdown need not move them):

* **one check alone**: its single-check threshold times its spread with the other checks at the
  reference mean (``JointNoise.quiet_scales``: where its band's worse end is then), or its tolerance
  if that is further; the least of them, and the median;
* **every check together**: a slowdown that moves each of these checks by the same factor moves the
  composite by that much times their share of its weights; it fails the gate once the composite is
  past its threshold and one check's statistic is past the single-check t (and its change past its
  tolerance), or, with fewer than :data:`joint.MIN_FACTOR_RUNS` runs (no common movement taken out),
  once one check alone is past its threshold;
* **runs needed**: the same figure for a longer history of runs like these (the composite's threshold
  redrawn for that many runs with their correlation, each spread and the candidates' kept as they
  are), the fewest runs, up to :data:`noise.MAX_REFERENCE_RUNS`, that bring it to twice the tolerance.
  An estimate: the spreads of a few runs are themselves uncertain.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from loadtest.analysis.bootstrap import rng_for
from loadtest.compare import joint, joint_null, noise

#: "Near the tolerance": a change of every check by this many tolerances fails the gate.
NEAR = 2.0


@dataclass(frozen=True)
class ReachCheck:
    """One gated check judged against the run-to-run noise, as :func:`reach` reads it."""

    name: str
    noise: joint.CheckNoise
    slot: int  # its place among the checks judged together
    tolerance: float
    relative: bool


@dataclass(frozen=True)
class Reach:
    """The smallest changes that would fail the gate (relative, worse: latency up, throughput down alike)."""

    runs: int
    candidates: int
    every_check: float
    one_check: float
    one_check_name: str
    one_check_median: float
    target: float  # NEAR × the median tolerance
    runs_for_target: int | None  # None: not within noise.MAX_REFERENCE_RUNS

    @property
    def wide(self) -> bool:
        """The gate cannot catch a change of every check by twice the tolerance: say so."""
        return not self.every_check <= self.target

    def to_dict(self) -> dict[str, Any]:
        return {"reference_runs": self.runs, "candidate_runs": self.candidates, "every_check": self.every_check,
                "one_check": self.one_check, "one_check_name": self.one_check_name,
                "one_check_median": self.one_check_median, "target": self.target,
                "runs_for_target": self.runs_for_target}

    def words(self) -> str:
        """The warning: what fails the gate now, and what more runs would do."""
        now = (f"with {self.runs} reference runs the gate fails only a change of every check together past about "
               f"{_worse(self.every_check)}, or of one check alone past {_worse(self.one_check)} "
               f"({self.one_check_name}; {_worse(self.one_check_median)} for the median check)")
        target = f"a change of every check by {self.target * 100:.0f}% (twice the tolerance)"
        like = f"that spread as these {self.runs} do"
        if self.runs_for_target is not None:
            return f"{now}; about {self.runs_for_target} reference runs {like} would catch {target}"
        more = "" if self.candidates > 1 else "; more candidate runs (--repeat) narrow it too"
        return (f"{now}; not even {noise.MAX_REFERENCE_RUNS} reference runs {like} (the most the gate keeps) "
                f"would catch {target}: the runs move that much from one to the next{more}")


def reach(joint_noise: joint.JointNoise, checks: Sequence[ReachCheck], seed: int = 0) -> Reach | None:
    """What the gate could catch (module doc); None without a gated latency or throughput check."""
    speed = [c for c in checks if c.relative and 0 <= c.slot < len(joint_noise.alone)
             and math.isfinite(joint_noise.alone[c.slot])]
    if not speed:
        return None
    # the single-check threshold × the check's spread, the other checks at the reference mean: not its band as
    # observed, whose worse end is nearer once the candidates' run as a whole is worse (a regression's figures
    # would then read as if the gate could catch +17% where a healthy run's read +34%)
    alone = [max(joint_noise.max_critical * joint_noise.quiet_scales[c.slot], math.log1p(c.tolerance)) for c in speed]
    least = int(np.argmin(alone))
    share = sum(joint_noise.weights[c.slot] for c in speed)
    tol = statistics.median(c.tolerance for c in speed)
    target = math.log1p(NEAR * tol)

    def every(runs: int, critical: float) -> float:
        """A change of every check (log) that fails the gate with ``runs`` reference runs."""
        m = joint_noise.candidates
        from scipy.stats import t as student_t  # scipy: start-up time, as in joint

        marginal = float(student_t.ppf(1.0 - joint_noise.false_alarms * joint.COMPOSITE_SHARE, max(1, runs - 1)))
        per_run = joint_noise.composite_scale / math.sqrt(1.0 / m + 1.0 / joint_noise.runs)
        composite = critical * per_run * math.sqrt(1.0 / m + 1.0 / runs) / share if share > 0 else math.inf
        composite = composite if math.isfinite(composite) else math.inf  # no spread of the composite: no route
        named = min(max(marginal * _scale(c.noise, runs), math.log1p(c.tolerance)) for c in speed)
        out = max(composite, named)
        if runs == joint_noise.runs and not joint_noise.factor:  # each check alone, no common movement taken out
            out = min(out, min(alone))
        return out

    now = every(joint_noise.runs, joint_noise.composite_critical)
    if not math.isfinite(now):
        return None
    needed = None
    if now > target:
        needed = _runs_for(lambda n: every(n, composite_critical_at(joint_noise, n, rng_for(seed, "reach", n))),
                           joint_noise.runs + 1, noise.MAX_REFERENCE_RUNS, target)
    else:
        needed = joint_noise.runs
    return Reach(joint_noise.runs, joint_noise.candidates, noise.to_relative(now), noise.to_relative(alone[least]),
                 speed[least].name, noise.to_relative(float(np.median(alone))), NEAR * tol, needed)


def composite_critical_at(joint_noise: joint.JointNoise, runs: int, rng: np.random.Generator,
                          resamples: int = joint.RESAMPLES // 2) -> float:
    """The composite's threshold with ``runs`` reference runs like these (their correlation), as
    :func:`joint.calibrate` would draw it: what a longer history would ask of a run that moved as a whole."""
    if joint_noise.residuals is None:
        return math.nan
    comp, _ = joint_null.null_replicates(joint_noise.residuals, runs, joint_noise.candidates, rng, resamples,
                                    joint_noise.lam, runs >= joint.MIN_FACTOR_RUNS)
    return float(np.quantile(comp, 1.0 - joint_noise.false_alarms * joint.COMPOSITE_SHARE))


def narrowed(joint_noise: joint.JointNoise, i: int, check: joint.CheckNoise) -> str:
    """``worse`` when check ``i``'s band (:meth:`joint.JointNoise.band`) ends nearer on the worse side than its
    threshold alone, because the run as a whole moved worse (a check then turns at the single-check t),
    ``better`` likewise, or "". Why said: such a band is lopsided ([-10.9%, ×16.8] for a throughput), and
    that is its reason."""
    if not 0 <= i < len(joint_noise.alone):
        return ""
    lo, hi = joint_noise.band(i, check)
    offset, scale = joint_noise.band_basis(i, check)
    if hi < offset + joint_noise.max_critical * scale:
        return "worse"
    if lo > offset - joint_noise.max_critical * scale:
        return "better"
    return ""


def _scale(check: joint.CheckNoise, runs: int) -> float:
    """The check's standard deviation of (candidates' mean − reference mean) with ``runs`` reference runs."""
    return math.sqrt(check.candidate_spread ** 2 / check.m + check.spread ** 2 / runs)


def _runs_for(every: Callable[[int], float], low: int, high: int, target: float) -> int | None:
    """The fewest runs in [low, high] whose ``every(runs)`` is within ``target`` (it shrinks with more runs;
    a bisection, each step one bootstrap), or None."""
    if low > high or not every(high) <= target:
        return None
    while low < high:
        mid = (low + high) // 2
        if every(mid) <= target:
            high = mid
        else:
            low = mid + 1
    return low


def _worse(x: float) -> str:
    """``+140%``, or past a doubling ``×12`` (as the bands print: :func:`noise.fmt_band_end`)."""
    return noise.fmt_band_end(x) if x >= 1.0 else f"{x * 100:+.0f}%"
