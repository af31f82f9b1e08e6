"""Time to first token against prompt length, at concurrency 1: the prefill curve.

Why at concurrency 1: with nothing else running, TTFT is the prefill of one
prompt plus a fixed cost (network, tokenizer, scheduler, the first decode
step), with no queueing mixed in. So ``TTFT = fixed + per_token × L`` (plus
``quadratic × L²`` where long prompts show attention's growth) says whether a
high TTFT under load is slow prefill or queueing.

The line is fitted to each length's median TTFT (robust to a request that
waited on a busy machine); intervals are a bootstrap over the requests within
each length, seeded so that a re-analysis gives the same numbers. Pure functions.
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
    def measurable(self) -> bool:
        """The slope is above zero with its whole interval: else TTFT does not rise with the prompt beyond noise."""
        return self.ms_per_token > 0 and self.ms_per_token_ci[0] > 0

    @property
    def tokens_per_s(self) -> float:
        return 1000.0 / self.ms_per_token if self.ms_per_token > 0 else math.nan

    @property
    def tokens_per_s_ci(self) -> tuple[float, float]:
        lo, hi = self.ms_per_token_ci
        return (1000.0 / hi if hi > 0 else math.nan, 1000.0 / lo if lo > 0 else math.inf)


def _poly(x: np.ndarray, y: np.ndarray, degree: int) -> np.ndarray:
    return np.polynomial.polynomial.polyfit(x, y, degree)


def _medians(x: np.ndarray, y: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    return np.asarray([np.median(y[x == L]) for L in lengths])


def fit_prefill(
    prompt_tokens: Sequence[float], ttft_ms: Sequence[float], *, seed: int = 0, resamples: int = 400
) -> PrefillFit | None:
    """Fit TTFT against prompt length; None unless at least two distinct lengths have a finite TTFT.

    The line goes through each length's *median* TTFT, not every request: one
    request that waited on a busy machine (a 780 ms TTFT among 515 ms ones)
    would otherwise tilt the slope by 10%. The interval resamples the requests
    within each length, recomputes the medians and refits.
    """
    x = np.asarray(prompt_tokens, dtype=float)
    y = np.asarray(ttft_ms, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0)
    x, y = x[keep], y[keep]
    lengths = np.unique(x)
    if len(lengths) < 2:
        return None
    med = _medians(x, y, lengths)
    a, b = _poly(lengths, med, 1)
    resid = med - (a + b * lengths)
    fit = PrefillFit(fixed_ms=float(a), ms_per_token=float(b), rms_ms=float(np.sqrt(np.mean(resid**2))), n=len(x))
    fit.points = [
        {"prompt_tokens": int(L), "ttft_p50_ms": float(m), "n": int(np.sum(x == L))} for L, m in zip(lengths, med)
    ]
    if len(lengths) >= 3:
        c0, c1, c2 = _poly(lengths, med, 2)
        fit.quadratic_ms_per_token2 = float(c2)
        longest = float(lengths[-1])
        fit.quadratic_matters = abs(c2) * longest**2 > _QUADRATIC_SHARE * (a + b * longest)
    rng = random.Random(seed)
    groups = [y[x == L] for L in lengths]
    fixed, slope = [], []
    for _ in range(resamples):
        meds = np.asarray([np.median([g[rng.randrange(len(g))] for _ in range(len(g))]) for g in groups])
        ra, rb = _poly(lengths, meds, 1)
        fixed.append(ra)
        slope.append(rb)
    fit.fixed_ci = (float(np.percentile(fixed, 2.5)), float(np.percentile(fixed, 97.5)))
    fit.ms_per_token_ci = (float(np.percentile(slope, 2.5)), float(np.percentile(slope, 97.5)))
    return fit


def describe_prefill(fit: PrefillFit) -> str:
    """Plain words: what a prompt costs before the first token."""
    if not fit.measurable:  # flat within noise: no tokens/s to quote (it read "nan tokens/s")
        return (f"TTFT does not rise with prompt length ({fit.ms_per_token:+.4f} ms per prompt token, about "
                f"{fit.fixed_ms:.1f} ms at every length measured): prefill is too cheap to measure at these lengths; "
                "longer prompts would show it")
    fixed = f"on top of {fit.fixed_ms:.1f} ms fixed" if fit.fixed_ms >= 0 else "(the line's intercept is below zero: the curve bends upward)"
    # the example prompt is one the server took: 1,000 tokens, or the longest measured when that is
    # shorter (a server whose context per slot is 1,024 was told what a 1,000-token prompt would wait)
    longest = max((int(p.get("prompt_tokens") or 0) for p in fit.points), default=0)
    example = 1000 if not 0 < longest < 1000 else longest
    text = (
        f"prefill costs {fit.ms_per_token:.3f} ms per prompt token ({fit.tokens_per_s:,.0f} tokens/s) "
        f"{fixed}: a {example:,}-token prompt{' (the longest measured)' if example != 1000 else ''} waits about "
        f"{fit.fixed_ms + example * fit.ms_per_token:,.0f} ms for its first token at concurrency 1"
    )
    if fit.quadratic_matters:
        text += f"; long prompts grow faster than linearly ({fit.quadratic_ms_per_token2:.2e} ms per token²)"
    return text
