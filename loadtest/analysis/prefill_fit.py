"""Time to first token against prompt length, at concurrency 1: the prefill curve.

Why at concurrency 1: with nothing else running, TTFT is the prefill of one
prompt plus a fixed cost (network, tokenizer, scheduler, the first decode
step), with no queueing mixed in. So ``TTFT = fixed + per_token × L`` (plus
``quadratic × L²`` where long prompts show attention's growth) says whether a
high TTFT under load is slow prefill or queueing.

Intervals: a bootstrap over the requests (resampled with replacement, refitted),
seeded so that a re-analysis gives the same numbers. Pure functions.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

#: The quadratic term is reported when it changes the longest prompt's TTFT by this share.
_QUADRATIC_SHARE = 0.05


@dataclass
class PrefillFit:
    fixed_ms: float
    ms_per_token: float
    #: ms per token², from a second fit with a quadratic term (NaN when too few lengths).
    quadratic_ms_per_token2: float = math.nan
    #: Does the quadratic term matter at the longest prompt measured?
    quadratic_matters: bool = False
    fixed_ci: tuple[float, float] = (math.nan, math.nan)
    ms_per_token_ci: tuple[float, float] = (math.nan, math.nan)
    rms_ms: float = math.nan
    n: int = 0
    #: Per prompt length: median TTFT and count.
    points: list[dict] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return 1000.0 / self.ms_per_token if self.ms_per_token > 0 else math.nan

    @property
    def tokens_per_s_ci(self) -> tuple[float, float]:
        lo, hi = self.ms_per_token_ci
        return (1000.0 / hi if hi > 0 else math.nan, 1000.0 / lo if lo > 0 else math.inf)


def _poly(x: np.ndarray, y: np.ndarray, degree: int) -> np.ndarray:
    return np.polynomial.polynomial.polyfit(x, y, degree)


def fit_prefill(
    prompt_tokens: Sequence[float], ttft_ms: Sequence[float], *, seed: int = 0, resamples: int = 400
) -> PrefillFit | None:
    """Fit TTFT against prompt length; None unless at least two distinct lengths have a finite TTFT."""
    x = np.asarray(prompt_tokens, dtype=float)
    y = np.asarray(ttft_ms, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0)
    x, y = x[keep], y[keep]
    lengths = np.unique(x)
    if len(lengths) < 2:
        return None
    a, b = _poly(x, y, 1)
    resid = y - (a + b * x)
    fit = PrefillFit(fixed_ms=float(a), ms_per_token=float(b), rms_ms=float(np.sqrt(np.mean(resid**2))), n=len(x))
    fit.points = [
        {"prompt_tokens": int(L), "ttft_p50_ms": float(np.median(y[x == L])), "n": int(np.sum(x == L))}
        for L in lengths
    ]
    if len(lengths) >= 3:
        c0, c1, c2 = _poly(x, y, 2)
        fit.quadratic_ms_per_token2 = float(c2)
        longest = float(lengths[-1])
        fit.quadratic_matters = abs(c2) * longest**2 > _QUADRATIC_SHARE * (a + b * longest)
    rng = random.Random(seed)
    idx = np.arange(len(x))
    fixed, slope = [], []
    for _ in range(resamples):
        pick = np.asarray([rng.choice(idx) for _ in idx])
        if len(np.unique(x[pick])) < 2:
            continue
        ra, rb = _poly(x[pick], y[pick], 1)
        fixed.append(ra)
        slope.append(rb)
    if fixed:
        fit.fixed_ci = (float(np.percentile(fixed, 2.5)), float(np.percentile(fixed, 97.5)))
        fit.ms_per_token_ci = (float(np.percentile(slope, 2.5)), float(np.percentile(slope, 97.5)))
    return fit


def describe_prefill(fit: PrefillFit) -> str:
    """Plain words: what a prompt costs before the first token."""
    text = (
        f"prefill costs {fit.ms_per_token:.3f} ms per prompt token ({fit.tokens_per_s:,.0f} tokens/s) "
        f"on top of {fit.fixed_ms:.1f} ms fixed: a 1,000-token prompt waits about "
        f"{fit.fixed_ms + 1000 * fit.ms_per_token:,.0f} ms for its first token at concurrency 1"
    )
    if fit.quadratic_matters:
        text += f"; long prompts grow faster than linearly ({fit.quadratic_ms_per_token2:.2e} ms per token²)"
    return text
