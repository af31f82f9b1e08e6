"""Each run's side of the bootstrap, drawn from its own samples alone, one run at a time.

A change's interval joins two sets of replicates: the candidate's statistic
under resampling of its requests, and the baseline's (see :mod:`delta`). Each
is drawn from one run's samples with a stream of its own
(``rng_for(seed, "compare-<which>", level, check)``), so the two can be drawn
at different times. The comparison uses that to hold one run's samples at a
time: a run's ITL samples are the bulk of what it reads (one per token, 100M
in a 3-hour soak), and holding both runs' for every level until the last
check was drawn doubled what a comparison needed. Here one run's samples are
made, each level's replicates are drawn, the level is dropped, and only the
replicates (:data:`delta.RESAMPLES` numbers per check) stay.

Which checks a level draws for (:func:`plan`) is what the judgement will use
(:func:`values`: both runs have the figure), so no draw is made that the old
order of drawing did not make, and every draw is the same numbers.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from loadtest.analysis.bootstrap import rng_for
from loadtest.analysis.slo import PERCENTILES
from loadtest.compare import delta
from loadtest.compare.level_keys import LevelKey
from loadtest.compare.rules import COMPLETED_SHARE, ERROR_RATE, THROUGHPUT, check_kind, split_class
from loadtest.compare.samples import LevelSamples
from loadtest.compare.summary_values import check_value, num

#: Per level, per check: one run's replicates.
Draws = dict[LevelKey, dict[str, np.ndarray]]


def values(check: str, lb: Mapping[str, Any], lc: Mapping[str, Any]) -> tuple[float, float] | None:
    """The baseline's and the candidate's figure for ``check`` at a level; None when either has none."""
    vb, vc = check_value(lb, check), check_value(lc, check)
    return None if math.isnan(vb) or math.isnan(vc) else (vb, vc)


def plan(levels_b: Mapping[LevelKey, Mapping[str, Any]], levels_c: Mapping[LevelKey, Mapping[str, Any]],
         common: list[LevelKey], checks: list[str]) -> dict[LevelKey, list[str]]:
    """Per common level, the checks whose change is judged (both runs have the figure)."""
    # the completed share's interval is its counts' (level_changes), not a resampling: no draws for it; nor
    # for a request class's check (its summaries' intervals give it: the samples are the whole level's)
    return {conc: [c for c in checks if c != COMPLETED_SHARE and split_class(c)[0] is None
                   and values(c, levels_b[conc], levels_c[conc]) is not None]
            for conc in common}


def draw_run(
    samples_of: Callable[[], dict[LevelKey, LevelSamples]] | None,
    levels: Mapping[LevelKey, Mapping[str, Any]],
    checks: Mapping[LevelKey, list[str]],
    which: str,
    seed: int,
) -> Draws:
    """One run's replicates per level and check in ``checks``; ``{}`` without records (``samples_of`` None).

    ``samples_of`` makes the run's samples (it reads its chunk lists); each
    level's are dropped once drawn. A level the run measured gets an entry even
    when no check of it is judged: the judgement tells "no records" from "no
    change to judge" by it. ``levels`` is the run's own summary levels by
    level key (the throughput replicates scale its own rate); ``which`` is
    ``baseline`` or ``candidate``.
    """
    if samples_of is None:
        return {}
    samples = samples_of()
    out: Draws = {}
    for conc in list(samples):
        level = samples.pop(conc)
        out[conc] = {check: _draw(check, level, levels.get(conc) or {}, rng_for(seed, f"compare-{which}", conc, check))
                     for check in checks.get(conc, [])}
        del level  # this level's samples (its ITL: one per token) go before the next level's draws
    return out


def _draw(check: str, level: LevelSamples, own: Mapping[str, Any], rng: np.random.Generator) -> np.ndarray:
    k = check_kind(check)
    if k == "latency":
        metric, _, pct = check.partition(".")
        return delta.percentile_replicates(level.latency[metric], PERCENTILES[pct], rng)
    if k == "throughput":
        return delta.throughput_replicates(num(own.get(THROUGHPUT)), level.served_e2e_ms, level.served_tokens, rng)
    return delta.share_replicates(level.failed if check == ERROR_RATE else level.valid, rng)
