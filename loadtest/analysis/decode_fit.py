"""Decode step time against batch size: a two-segment fit and its knee.

Why two segments: on a GPU a decode step reads every weight once whatever the
batch, so up to some batch size extra sequences are nearly free (each adds
only its KV-cache reads: the memory-bound segment); past it the arithmetic
catches up and each extra sequence adds its full compute (the compute-bound
segment). The knee between them is the batch size past which concurrency
stops being cheap, the first thing to know when sizing ``max_num_seqs``.

The model, in milliseconds, for ``n`` sequences decoding together::

    step(n) = max(fixed + per_seq × n,  compute_intercept + compute_per_seq × n)

With ``compute_intercept = 0`` this is ``max(fixed + per_seq × n,
compute_per_seq × n)``, the model fitted by default; a real step also pays a
fixed overhead on the compute side (kernel launches, the scheduler), which
biases the through-the-origin slope up by ``overhead / n``, so an intercept is
fitted where enough points past the knee can carry it.

The fit: every split of the sorted points into a low and a high segment, a
least-squares line on the low one and a line through the origin on the high
one, the knee where they cross; the split with the least squared error wins,
if it beats one line by the Bayesian information criterion, if the points past
the knee lie clearly above the low line (1.5%), and if its knee lies
between the segments (see :func:`fit_decode` for when the compute line gets
an intercept of its own). Pure functions over numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

#: A compute-side intercept must cut that segment's squared error by this factor to be kept.
_TWO_SEGMENT_GAIN = 4.0
#: ...and the points past the knee must lie above the low line's extrapolation by more than
#: this share of their step time (above the sub-percent jitter of a median ITL), so that a
#: flat curve does not get a knee at its last point from sub-percent jitter.
_MIN_EXCESS = 0.015


@dataclass(frozen=True)
class DecodePoint:
    """One measured batch size: its step time (ITL) and throughput."""

    sequences: float
    itl_p50_ms: float
    itl_p95_ms: float = math.nan
    tokens_per_s: float = math.nan
    #: Median per-request mean ms per token: the server's own "ms per generated token"
    #: (chunk gaps' median can sit below it when the client reads chunks coalesced).
    tpot_p50_ms: float = math.nan


@dataclass
class DecodeFit:
    """The fitted decode curve (see the module docstring)."""

    fixed_ms: float
    per_seq_ms: float
    #: Slope past the knee; NaN when no knee was seen in the measured range.
    compute_ms_per_seq: float = math.nan
    compute_intercept_ms: float = math.nan
    #: Batch size where the two lines cross; None when every point lies on one line.
    knee_sequences: float | None = None
    #: Root-mean-square residual of the fit, ms.
    rms_ms: float = math.nan
    points: list[DecodePoint] = field(default_factory=list)

    def step_ms(self, n: float) -> float:
        """The fitted step time at ``n`` sequences."""
        low = self.fixed_ms + self.per_seq_ms * n
        if self.knee_sequences is None:
            return low
        return max(low, self.compute_intercept_ms + self.compute_ms_per_seq * n)

    def side(self, n: float) -> str:
        """``"flat"`` below the knee (extra sequences nearly free), ``"steep"`` past it."""
        return "steep" if self.knee_sequences is not None and n > self.knee_sequences else "flat"

    @property
    def batching_pays(self) -> bool:
        """Whether a sequence added to the batch costs less than the whole step at one: a fixed cost above zero.

        Why one rule: the bound the fit alone gives a point (:func:`loadtest.analysis.roofline.fit_bound`)
        and the fit's own words (:func:`describe_decode`) both read it, so a table cannot label a point
        ``memory_or_overhead`` beside a sentence that says its compute grows with the batch (a 1-thread
        llama.cpp server: 1.08 ms at one sequence, 3.71 ms at two). At or below zero the step grows at least
        as fast as the batch: each sequence pays its whole compute or more (threads it shares), and the
        linear model, a fixed cost the batch shares plus a cost per sequence, does not describe it, so its
        intercept is no cost. A fit with a knee always pays below it (the split needs a fixed cost above 0).
        """
        return self.fixed_ms > 0

    @property
    def parameters(self) -> int:
        """The numbers fitted: the low line's two, and past a knee its slope (and its intercept where fitted)."""
        if self.knee_sequences is None:
            return 2
        return 3 if not self.compute_intercept_ms else 4

    @property
    def exact(self) -> bool:
        """No more batch sizes than parameters: the fit passes through every point (``rms_ms`` 0 by
        construction), so the points cannot check it (two points always lie on a line)."""
        return len({p.sequences for p in self.points}) <= self.parameters


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float]:
    """A robust ``y = a + b x`` (Theil-Sen: the median of the pairwise slopes, the median intercept).

    Why not least squares: one level measured while the machine was busy (a
    median ITL 1 ms high) tilts a least-squares slope of 0.25 ms per sequence
    by 15%; the median of the pairwise slopes ignores it. Returns (a, b, sum
    of squared residuals).
    """
    n = len(xs)
    if n >= 3:
        slopes = sorted(
            (ys[j] - ys[i]) / (xs[j] - xs[i]) for i in range(n) for j in range(i + 1, n) if xs[j] != xs[i]
        )
        if slopes:
            b = _median(slopes)
            a = _median([y - b * x for x, y in zip(xs, ys)])
            return a, b, sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my, 0.0, sum((y - my) ** 2 for y in ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    return a, b, sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _origin_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``y = b x`` (through the origin): (b, sum of squared residuals)."""
    b = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs)
    return b, sum((y - b * x) ** 2 for x, y in zip(xs, ys))


def _in_gap(knee: float, low_last: float, high_first: float) -> bool:
    return low_last - 0.5 <= knee <= high_first + 0.5


def _two_beat_one(sse_one: float, sse_two: float, n: int) -> bool:
    """Do two segments (4 parameters) explain the points better than one line (2), by BIC?

    BIC = n ln(SSE / n) + k ln(n): the extra knee and slope must buy more than
    their ``2 ln(n)``. A plain error ratio would let noise at small batches
    (where a few ms of jitter dominate) hide a real bend further out.
    """
    floor = 1e-12  # two exact lines: as good as it gets
    bic_one = n * math.log(max(sse_one, floor) / n) + 2 * math.log(n)
    bic_two = n * math.log(max(sse_two, floor) / n) + 4 * math.log(n)
    return bic_two < bic_one


def fit_decode(points: Sequence[DecodePoint]) -> DecodeFit | None:
    """Fit ``points`` (any order; one per batch size); None with fewer than two usable points.

    The compute segment goes through the origin (the issue's model): a free
    intercept would let any two points past a split be fitted exactly, so the
    split with the most points past it would always win. Only when at least
    three points lie past the knee is an intercept tried, and kept if it cuts
    that segment's squared error by the same factor two segments must beat one.
    """
    pts = sorted(
        (p for p in points if p.sequences > 0 and math.isfinite(p.itl_p50_ms) and p.itl_p50_ms > 0),
        key=lambda p: p.sequences,
    )
    if len({p.sequences for p in pts}) < 2:
        return None
    xs = [float(p.sequences) for p in pts]
    ys = [float(p.itl_p50_ms) for p in pts]
    a, b, sse1 = _line(xs, ys)
    one_line = DecodeFit(fixed_ms=a, per_seq_ms=b, rms_ms=math.sqrt(sse1 / len(xs)), points=list(pts))
    best: DecodeFit | None = None
    best_sse = math.inf
    best_split = 0
    for split in range(2, len(xs)):  # low = xs[:split] (>= 2 points), high = xs[split:] (>= 1)
        a1, b1, s1 = _line(xs[:split], ys[:split])
        b2, s2 = _origin_line(xs[split:], ys[split:])
        if b2 <= b1 or a1 <= 0:
            continue  # not steeper past the split (or no fixed cost): no knee here
        knee = a1 / (b2 - b1)
        if not _in_gap(knee, xs[split - 1], xs[split]):
            continue  # the lines cross outside the gap between the segments
        excess = [(y - (a1 + b1 * x)) / y for x, y in zip(xs[split:], ys[split:])]
        if max(excess) < _MIN_EXCESS:
            continue  # past the split the points still sit on the low line: no knee seen
        if s1 + s2 < best_sse:
            best_sse, best_split = s1 + s2, split
            best = DecodeFit(
                fixed_ms=a1, per_seq_ms=b1, compute_ms_per_seq=b2, compute_intercept_ms=0.0,
                knee_sequences=knee, rms_ms=math.sqrt((s1 + s2) / len(xs)), points=list(pts),
            )
    if best is None or not _two_beat_one(sse1, best_sse, len(xs)):
        return one_line  # not clearly better than one line: no knee seen
    high_x, high_y = xs[best_split:], ys[best_split:]
    if len(high_x) >= 3:
        a2, b2, s2 = _line(high_x, high_y)
        _, s2_origin = _origin_line(high_x, high_y)
        if b2 > best.per_seq_ms and s2 * _TWO_SEGMENT_GAIN < s2_origin:
            knee = (best.fixed_ms - a2) / (b2 - best.per_seq_ms)
            if _in_gap(knee, xs[best_split - 1], xs[best_split]):
                s1 = best_sse - s2_origin
                best.compute_ms_per_seq, best.compute_intercept_ms, best.knee_sequences = b2, a2, knee
                best.rms_ms = math.sqrt((s1 + s2) / len(xs))
    return best


def knee_bracket(fit: DecodeFit) -> tuple[float, float] | None:
    """The measured batch sizes either side of the knee (the interval to probe next), or None."""
    if fit.knee_sequences is None:
        return None
    xs = sorted({p.sequences for p in fit.points})
    below = [x for x in xs if x <= fit.knee_sequences]
    above = [x for x in xs if x > fit.knee_sequences]
    if not below or not above:
        return None
    return below[-1], above[0]


def probes_between(lo: float, hi: float, count: int = 3) -> list[int]:
    """Up to ``count`` whole batch sizes strictly inside ``(lo, hi)``, evenly spread (for refinement)."""
    inside = list(range(int(math.floor(lo)) + 1, int(math.ceil(hi))))
    if len(inside) <= count:
        return inside
    step = (hi - lo) / (count + 1)
    out = sorted({int(round(lo + step * (i + 1))) for i in range(count)})
    return [x for x in out if lo < x < hi]


def describe_decode(fit: DecodeFit, bound_low: str | None = None, bound_high: str | None = None) -> str:
    """The plain-words sentence: what the curve means for adding users."""
    base = fit.fixed_ms + fit.per_seq_ms
    per_seq = max(0.0, fit.per_seq_ms)  # a fit a hair below zero (a flat curve) reads 0.00, not -0.00
    if not fit.batching_pays:
        # the measured ends, not the line's: its intercept is no cost (DecodeFit.batching_pays)
        first, last = fit.points[0], fit.points[-1]
        label = f"{bound_low}-bound" if bound_low else "compute-bound (its arithmetic, or CPU threads it shares)"
        return (
            f"decode step {first.itl_p50_ms:.2f} ms at {first.sequences:g} sequence{'s' if first.sequences != 1 else ''} "
            f"and {last.itl_p50_ms:.2f} ms at {last.sequences:g}: the step grows at least as fast as the batch "
            f"(each added sequence costs {per_seq:.2f} ms, as much as the whole step at one or more), so batching "
            f"does not pay on this server: {label}"
        )
    if fit.knee_sequences is None:
        n_max = max(p.sequences for p in fit.points)
        label = f": {bound_low}-bound" if bound_low else ""
        return (
            f"decode step {base:.1f} ms at 1 sequence; each extra sequence adds {per_seq:.2f} ms "
            f"up to the {n_max:g} tested (no knee seen){label}"
        )
    low = f"{bound_low}-bound" if bound_low else "nearly free"
    high = f": {bound_high}-bound" if bound_high else ""
    return (
        f"decode is {low} up to about {fit.knee_sequences:.0f} sequences (each extra sequence adds "
        f"{per_seq:.2f} ms to a {base:.1f} ms step); past that each adds "
        f"{fit.compute_ms_per_seq:.2f} ms{high}"
    )
