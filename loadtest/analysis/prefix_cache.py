"""Prefix-cache hit rate per level: from the server's counters where it has them, else from the responses.

A prefix cache that stops hitting under load (evicted by the traffic's
working set) is a common reason for TTFT to break, so each level says how much
of its prompts the server served from cache. Two sources, each where present:

* **server**: counters scraped from ``/metrics`` over the level's measured
  window (the increase from the last scrape before the window to the last one
  inside it). vLLM V1 (``vllm/v1/metrics/loggers.py``) counts tokens:
  ``vllm:prefix_cache_queries_total`` (prompt tokens looked up) and
  ``vllm:prefix_cache_hits_total`` (of them, cached); the V0 engine's
  ``vllm:gpu_prefix_cache_queries_total``/``hits_total`` the same. SGLang
  (``python/sglang/srt/metrics/collector.py``) exports a gauge,
  ``sglang:cache_hit_rate``: its mean over the window's scrapes.
* **responses**: ``usage.prompt_tokens_details.cached_tokens`` (OpenAI's field,
  sent by vLLM and SGLang when asked, and by the mock), or llama.cpp's
  ``timings.cache_n`` (prompt tokens reused from the slot's cache), summed over
  the level's measured successful requests that report it, divided by their
  prompt tokens.

``hit_rate`` is the server's figure when there is one (it counts every request
the server saw, ours only if nothing else talks to it), else the responses'.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

#: (hits counter, queries counter), both in tokens, newest name first.
SERVER_COUNTERS: tuple[tuple[str, str], ...] = (
    ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
    ("vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total"),
)
#: Hit-rate gauges (a fraction).
SERVER_GAUGES: tuple[str, ...] = ("sglang:cache_hit_rate",)


def _counter_at(samples: pd.DataFrame, metric: str, at: float) -> float | None:
    """The counter's value (summed over its series) at the last scrape at or before ``at``."""
    rows = samples[(samples["metric"] == metric) & (samples["wall"] <= at)]
    if not len(rows):
        return None
    last = rows["wall"].max()
    return float(rows.loc[rows["wall"] == last, "value"].sum())


def server_hit_rate(samples: pd.DataFrame | None, start: float, end: float) -> dict[str, Any] | None:
    """The server's hit rate over [start, end), and what it was read from; None when it reports none."""
    if samples is None or not len(samples):
        return None
    names = set(samples["metric"].unique())
    for hits_name, queries_name in SERVER_COUNTERS:
        if hits_name in names and queries_name in names:
            h0, h1 = _counter_at(samples, hits_name, start), _counter_at(samples, hits_name, end)
            q0, q1 = _counter_at(samples, queries_name, start), _counter_at(samples, queries_name, end)
            if None in (h0, h1, q0, q1):
                continue  # no scrape before the window: its start is unknown (the counters hold the warm-up too)
            hits, queries = h1 - h0, q1 - q0
            if queries <= 0:
                return None
            return {"hit_rate": hits / queries, "metric": hits_name, "hit_tokens": hits, "query_tokens": queries}
    for gauge in SERVER_GAUGES:
        if gauge in names:
            rows = samples[(samples["metric"] == gauge) & (samples["wall"] >= start) & (samples["wall"] < end)]
            values = rows.groupby("wall")["value"].mean().to_numpy(dtype=float)
            values = values[np.isfinite(values)]
            if len(values):
                return {"hit_rate": float(values.mean()), "metric": gauge, "scrapes": int(len(values))}
    return None


def responses_hit_rate(cached: np.ndarray, prompt: np.ndarray) -> dict[str, Any] | None:
    """Cached / prompt tokens over the requests whose response said how many were cached."""
    known = np.isfinite(cached) & np.isfinite(prompt) & (prompt > 0)
    if not known.any():
        return None
    total = float(prompt[known].sum())
    return {"hit_rate": float(cached[known].sum()) / total, "cached_tokens": int(cached[known].sum()),
            "prompt_tokens": int(total), "requests": int(known.sum())}


def level_prefix_cache(
    frame: pd.DataFrame, cached: np.ndarray, samples: pd.DataFrame | None, windows: Sequence[tuple[int, float, float]]
) -> dict[int, dict[str, Any]]:
    """``levels[].prefix_cache`` per level index: {hit_rate, source, server, responses}; levels without either are left out.

    ``cached`` is the records' ``cached_tokens`` (NaN where not reported), row for row with ``frame``;
    ``windows`` (level index, measured start, end) in wall time.
    """
    out: dict[int, dict[str, Any]] = {}
    mask_ok = frame["ok"].to_numpy() & frame["measured"].to_numpy()
    level_of = frame["level_index"].to_numpy()
    prompt = frame["prompt_tokens"].to_numpy(dtype=float)
    for index, start, end in windows:
        mine = mask_ok & (level_of == index)
        responses = responses_hit_rate(cached[mine], prompt[mine])
        server = server_hit_rate(samples, start, end)
        if responses is None and server is None:
            continue
        best, source = (server, "server") if server is not None else (responses, "responses")
        out[index] = {"hit_rate": round(best["hit_rate"], 4), "source": source, "server": server, "responses": responses}
    return out
