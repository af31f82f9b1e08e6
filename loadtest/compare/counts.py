"""A rate whose reference runs never went wrong, judged by its count: an exact test, not a normal band.

The gate's run-to-run noise (:mod:`joint`) models each check as normal with a spread
estimated from a few runs, floored by each run's own interval. For the error rate
(and the share of invalid answers) against reference runs that had **none**, that
model is at its worst:

* the spread of all-zero runs is 0, so the floor, a Wilson interval at 0 failures,
  stands in for it, and Student's tails over a few runs then widen it sixfold or more;
* so 0 → 10% failures of about 50 requests a level, against 6 clean runs, was "within
  the run-to-run noise" (a band of ±29 points; tests/unit/test_compare_counts.py).

Yet the question is a count's: given that the reference runs' ``r`` requests had no
failure, are ``x`` failures among the candidates' ``n`` more than chance? If every
request failed independently at one rate shared by all the runs, each of the ``x``
failures was as likely to fall on any of the ``n + r`` requests, so the chance that
all ``x`` fell on the candidates is ``C(n, x) / C(n + r, x)``: the one-sided
conditional (Fisher) exact test, which needs no spread estimated from the runs and
whose false alarms stay within its level whatever that rate.

Requests do not fail independently, though: a network blip or a restart fails every
request in flight at once. So the counts are taken in **bursts** of the level's users
(an open loop's requests in flight), the worst case that every failure came in a full
burst (:class:`CleanCount`), and a single blip counts once. A steady failure rate is
still seen; it needs that factor more failures to be.

The gate applies it where every reference run of a level had no bad request, beside
the joint noise, at :data:`COUNT_ALARMS` split evenly over the checks it applies to.
A check it flags is a regression when the candidates' pooled share is also past the
tolerance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from loadtest.compare.noise import RunPoint

#: The false-alarm budget of the count test, over every check it applies to in one comparison.
COUNT_ALARMS = 0.01


@dataclass(frozen=True)
class CleanCount:
    """The candidates' bad requests against reference runs that had none, counted in bursts.

    ``burst``: the most requests one blip can fail at once, the level's users (in open loop its
    requests in flight). Requests are not independent: a network blip or a restart fails every
    request in flight together, and counted one by one a single blip of 8 failures among 400
    requests at 8 users read p = 6e-7 against clean runs. Counting in units of ``burst`` takes
    the worst case, that every failure came in a full burst, so a blip counts once; a steady
    failure rate is still seen, with the counts it needs scaled by the same factor.
    """

    bad: int  # the candidates' bad requests (failed, or invalid answers)
    trials: int  # the candidates' requests
    reference_trials: int  # the reference runs' requests, none of them bad
    burst: float = 1.0

    @property
    def rate(self) -> float:
        """The candidates' pooled bad share (the reference runs' is 0)."""
        return self.bad / self.trials if self.trials else math.nan

    @property
    def log_p(self) -> float:
        return log_tail_p(self.bad / self.burst, self.trials / self.burst, self.reference_trials / self.burst)

    @property
    def p(self) -> float:
        """One-sided exact p: the chance that all ``bad`` fell on the candidates by chance (in bursts)."""
        return math.exp(self.log_p)

    def flagged(self, alpha: float) -> bool:
        return alpha > 0 and self.log_p <= math.log(alpha)

    def smallest_flagged(self, alpha: float) -> int | None:
        """The fewest bad requests among the candidates' that the test flags at ``alpha`` (None: none can)."""
        if alpha <= 0:
            return None
        log_alpha, b = math.log(alpha), self.burst
        n, r = self.trials / b, self.reference_trials / b
        if log_tail_p(n, n, r) > log_alpha:
            return None
        lo, hi = 0, self.trials  # the p falls as the count grows: bisect for the first count at or below alpha
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if log_tail_p(mid / b, n, r) <= log_alpha else (mid, hi)
        return hi

    def p_text(self) -> str:
        return f"{self.p:.2g}" if self.p > 0 else f"1e{self.log_p / math.log(10):.0f}"


def log_tail_p(bad: float, trials: float, reference_trials: float) -> float:
    """log of ``C(trials, bad) / C(trials + reference_trials, bad)``, continued to fractional counts
    (the counts in bursts) by the gamma function; 0 (p = 1) with no bad request."""
    if bad <= 0:
        return 0.0
    if bad > trials:
        return -math.inf
    return (math.lgamma(trials + 1) - math.lgamma(trials - bad + 1)
            - math.lgamma(trials + reference_trials + 1) + math.lgamma(trials + reference_trials - bad + 1))


def burst_size(levels: Sequence[Mapping[str, Any] | None]) -> float:
    """The most requests one blip can fail at once in any of these summary levels (at least 1).

    A closed loop's users; an open loop's requests in flight (its time-average: a blip at a busier
    moment fails more, so this is the typical burst, not the worst)."""
    size = 1.0
    for lv in levels:
        if not lv:
            continue
        if lv.get("rate_rps") is None:
            size = max(size, float(lv.get("concurrency") or 1))
        else:
            size = max(size, math.ceil(float((lv.get("open_loop") or {}).get("mean_in_flight") or 1)))
    return size


def clean_count(candidates: Sequence[RunPoint], reference: Sequence[RunPoint], worse_high: bool,
                burst: float = 1.0) -> CleanCount | None:
    """The count to test, when every reference run had no bad request and every run says how many it made.

    ``worse_high``: the value is the bad share (the error rate); else the good share (valid answers).
    None otherwise: a reference run with some failure, or a value without its request count.
    """
    runs = [*candidates, *reference]
    if not candidates or not reference or not all(p.trials > 0 for p in runs):
        return None

    def bad(p: RunPoint) -> float:
        return p.value if worse_high else 1.0 - p.value

    if any(bad(p) > 1e-12 for p in reference):
        return None
    return CleanCount(bad=int(round(sum(bad(p) * p.trials for p in candidates))),
                      trials=sum(p.trials for p in candidates),
                      reference_trials=sum(p.trials for p in reference), burst=max(1.0, burst))
