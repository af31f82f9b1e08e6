"""A rate whose reference runs never went wrong, judged by its count: an exact test, not a normal band.

The gate's run-to-run noise (:mod:`joint`) models each check as normal with a spread
estimated from a few runs, floored by each run's own interval. For the error rate
(and the share of invalid answers) against reference runs that had **none**, that
model is at its worst:

* the spread of all-zero runs is 0, so the floor, a Wilson interval at 0 failures,
  stands in for it, and Student's tails over a few runs then widen it sixfold or more;
* so 0 → 5% failures of 100 requests a level, against 5 clean runs of 100, was
  "within the run-to-run noise" (band ±11 points), and 0 → 30% of 10 requests too.

Yet the question is a count's: given that the reference runs' ``r`` requests had no
failure, are ``x`` failures among the candidates' ``n`` more than chance? Under "the
same server" every one of the ``x + 0`` failures was equally likely to fall on any of
the ``n + r`` requests, so the chance that all ``x`` fell on the candidates is
``C(n, x) / C(n + r, x)``: the one-sided conditional (Fisher) exact test. It needs no
spread estimated from the runs, and is conservative: its false-alarm rate is at most
its level whatever the true (small) rate.

The gate applies it where every reference run of a level had no bad request, beside
the joint noise (either one calls the change beyond the noise), at
:data:`COUNT_ALARMS` split evenly over the checks it applies to, so it adds at most
that to the gate's false alarms. The tolerance still applies: a regression must also
be worse than the reference mean by more than it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from loadtest.compare.noise import RunPoint

#: The false-alarm budget of the count test, over every check it applies to in one comparison.
COUNT_ALARMS = 0.01


@dataclass(frozen=True)
class CleanCount:
    """The candidates' bad requests against reference runs that had none."""

    bad: int  # the candidates' bad requests (failed, or invalid answers)
    trials: int  # the candidates' requests
    reference_trials: int  # the reference runs' requests, none of them bad

    @property
    def p(self) -> float:
        """One-sided exact p: the chance that all ``bad`` fell on the candidates by chance."""
        return tail_p(self.bad, self.trials, self.reference_trials)

    def smallest_flagged(self, alpha: float) -> int | None:
        """The fewest bad requests among the candidates' that the test flags at ``alpha`` (None: none can)."""
        log_p, log_alpha = 0.0, math.log(alpha) if alpha > 0 else -math.inf
        for x in range(1, self.trials + 1):
            log_p += math.log((self.trials - x + 1) / (self.trials + self.reference_trials - x + 1))
            if log_p <= log_alpha:
                return x
        return None


def tail_p(bad: int, trials: int, reference_trials: int) -> float:
    """``C(trials, bad) / C(trials + reference_trials, bad)``, in logs (1 with no bad request)."""
    if bad <= 0:
        return 1.0
    if bad > trials:
        return 0.0
    return math.exp(sum(math.log((trials - i) / (trials + reference_trials - i)) for i in range(bad)))


def clean_count(candidates: Sequence[RunPoint], reference: Sequence[RunPoint], worse_high: bool) -> CleanCount | None:
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
                      reference_trials=sum(p.trials for p in reference))
