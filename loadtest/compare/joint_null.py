"""The gate's null draws: healthy runs drawn like the reference runs, to set the joint thresholds by.

:mod:`joint` calibrates its thresholds on these replicates; :mod:`reach` draws more of them to say
what more reference runs would catch. Kept apart from :mod:`joint`'s types so that each module
holds one idea: what the gate judges with (there), and how a healthy run is simulated (here).
"""

from __future__ import annotations

import math

import numpy as np


def shrinkage(u: np.ndarray) -> float:
    """Schäfer and Strimmer's (2005) weight of the identity in the shrunk correlation of ``u``'s columns.

    The estimated variance of the off-diagonal sample correlations over their squared sum: near 0 when
    the runs show a clear common movement, near 1 when the correlations are what a few runs show by chance.
    """
    n, k = u.shape
    if k < 2 or n < 3:
        return 0.0
    w = np.einsum("ik,il->ikl", u, u)
    w_mean = w.mean(axis=0)
    var = n / (n - 1) ** 3 * ((w - w_mean) ** 2).sum(axis=0)
    r = w_mean * n / (n - 1)
    off = ~np.eye(k, dtype=bool)
    denom = float((r[off] ** 2).sum())
    return float(np.clip(var[off].sum() / denom, 0.0, 1.0)) if denom > 0 else 1.0


def null_replicates(u: np.ndarray, n: int, m: int, rng: np.random.Generator, resamples: int,
                lam: float = 0.0, factor: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Null replicates of (composite, max of the single-check statistics): ``n`` reference and ``m``
    candidate runs drawn with the correlation of ``u``'s runs (its rows: ``n`` of them when calibrating,
    any number when :func:`reach.composite_critical_at` asks what more runs would give), every mean,
    spread, weight and factor recomputed as the gate does."""
    comps, maxes = [], []
    rows = u.shape[0]
    chunk = max(1, 2_000_000 // max(1, (n + m) * max(n, rows, u.shape[1])))
    done = 0
    scale = math.sqrt(1.0 / m + 1.0 / n)
    while done < resamples:
        r = min(chunk, resamples - done)
        z = rng.standard_normal((r, n + m, rows)) @ u / math.sqrt(rows - 1)  # r × (n + m) × checks
        if lam > 0:  # the shrunk correlation: (1 − λ) R̂ + λ I
            z = math.sqrt(1.0 - lam) * z + math.sqrt(lam) * rng.standard_normal(z.shape)
        ref, cand = z[:, :n], z[:, n:].mean(axis=1)
        mean, sd = ref.mean(axis=1), ref.std(axis=1, ddof=1)
        sd = np.where(sd > 0, sd, np.inf)
        resid, bad = ref - mean[:, None, :], cand - mean
        # each check weighs 1/spread: the mean of the standardized badness. (Precision weights, 1/spread²,
        # would be optimal if the spreads were known; estimated from a few runs they let one check whose
        # spread came out small carry the composite, and the threshold grows more than the signal.)
        weights = 1.0 / sd
        weights /= weights.sum(axis=1, keepdims=True)  # r × checks
        per_run = np.einsum("rik,rk->ri", resid, weights)  # r × n
        f_c = np.einsum("rk,rk->r", bad, weights)
        comp_sd = per_run.std(axis=1, ddof=1)
        comps.append(f_c / (np.where(comp_sd > 0, comp_sd, np.inf) * scale))
        if factor:
            ss = (per_run ** 2).sum(axis=1)
            beta = np.einsum("rik,ri->rk", resid, per_run) / ss[:, None]
            left = resid - per_run[:, :, None] * beta[:, None, :]
            sd_left = np.sqrt((left ** 2).sum(axis=1) / (n - 2))
            var = sd_left ** 2 * (1.0 / m + 1.0 / n + (f_c ** 2 / ss)[:, None])
            alone = (bad - beta * f_c[:, None]) / np.sqrt(np.where(var > 0, var, np.inf))
        else:
            alone = bad / (sd * scale)
        maxes.append(alone.max(axis=1))
        done += r
    return np.concatenate(comps), np.concatenate(maxes)
