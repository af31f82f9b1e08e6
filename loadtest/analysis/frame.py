"""The per-request frame: each record's derived timing, window membership and SLO outcome.

Raw records stay untouched; this frame adds what the metrics need, one
vectorized column at a time:

* ``pos``: position (in the window list) of the level the request *started* in;
* ``measured``: it started inside that level's measured window and is not
  flagged ``warmup``, so its TTFT/TTFB and its success or failure count there;
* ``spillover``: it outlived its level (ended after the level's end). Its
  chunks count where they arrived, and its e2e and TPOT count at the level it
  started in: the longest requests are the likeliest to outlive a level, so
  leaving them out would cut off exactly the slow tail;
* ``complete``: measured and finished inside the same window (reported, for
  the warning about levels that are short for the output length);
* ``*_sample``: the value each request contributes to a latency percentile.
  **Failed requests count as +inf** (a timeout is not a missing sample: it is
  a request that missed every limit). A failure that did produce a first
  token keeps its real TTFT; it gets +inf for e2e and TPOT;
* ``good``: completed successfully and met every per-request limit (goodput).

**Open loop** (records with a ``schedule_lag_ms`` column that holds values):
a request belongs to the level and window of its *scheduled* time, and its
TTFB, TTFT and e2e are measured from that time (send lag + the server's
time), because that is what a user arriving on that schedule waits; this is
what the SLO judges, and what keeps a late send from hiding a slow server
(coordinated omission). ``sent_wall`` keeps the actual send time (chunk
times are relative to it) and ``schedule_lag_ms`` the lag. An arrival
``dropped`` at ``max_in_flight`` was never sent: it is a failure like any other.
Closed-loop records have no such column and are unchanged.

A request with error kind ``cancelled`` was ended by the harness (users
stopped at a level change, at the end of a refine probe or of the run), not
by the server. It is *censored*, not failed: it counts in no error rate, and
what it did observe (a TTFT, chunk gaps) is kept. What it did not observe is
bounded by how long it had waited when it was cut (``e2e_ms``): a request
still waiting for its first token when a probe ended is exactly the slow
tail of a TTFT-bound level, so it must not vanish. The rule (the same one the
load stage applies to requests in flight when it decides a level early):

* its wait already exceeds the tightest limit on that metric → a certain
  miss, entered as +inf (whatever it would have become, it missed);
* otherwise it is left out: it was cut too early to say anything, and
  counting it as a miss would fail every level that a probe ends on time;
* a metric without a limit leaves it out (nothing is judged there);
* TPOT of a cut stream that had started is its TPOT so far.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.columns import boolean, numeric, text
from loadtest.analysis.output_validity import validity_column
from loadtest.analysis.slo import SloSpec
from loadtest.analysis.windows import LevelWindow, locate, position_by_index

#: Error kind of a request the harness itself ended (see module doc).
CANCELLED = "cancelled"


class ChunkCounts(Protocol):
    """Per request, what its chunks add to the frame (``chunks.Chunks``, ``chunk_pass.ChunkTotals``)."""

    counts: np.ndarray  # token-carrying chunks
    token_sums: np.ndarray  # their tokens
    first_tokens: np.ndarray  # the first such chunk's tokens (0 without one)


def outcomes(requests: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per request: (ok, error kind, cancelled by the harness, failed by the server)."""
    ok = boolean(requests, "ok")
    kinds = text(requests, "error_kind")
    cancelled = ~ok & (kinds == CANCELLED)
    return ok, kinds, cancelled, ~ok & ~cancelled


def first_chunk_tokens(chunks: ChunkCounts, tokens: np.ndarray) -> np.ndarray:
    """The tokens that arrived with each request's first content chunk: at least one.

    TPOT is the time per token generated after the first chunk. A server that
    sends several tokens a chunk delivers them all at TTFT, so ``tokens - 1``
    would divide the decode time over tokens it never spent time on (TPOT 12 ms
    against an ITL of 15 ms at 4 tokens a chunk). The count is the chunk's as ITL
    takes it (exact with per-chunk usage, else the usage total spread evenly),
    scaled as the tokens/s are when the server's total differs from the chunks';
    with one token a chunk it is 1, and TPOT is the usual (e2e − TTFT) / (tokens − 1).
    """
    sums = chunks.token_sums
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where((sums > 0) & (tokens > 0), tokens / sums, 1.0)
    return np.maximum(1.0, chunks.first_tokens * scale)


def send_e2e_ms(requests: pd.DataFrame) -> np.ndarray:
    """Each request's e2e from its actual send (open loop: not from the scheduled time), as the frame has it."""
    lag = scheduled_lag_ms(requests)
    return (numeric(requests, "e2e_ms") + lag) - np.nan_to_num(np.where(lag_known(requests), lag, np.nan))


def request_frame(
    requests: pd.DataFrame, windows: Sequence[LevelWindow], chunks: ChunkCounts, slo: SloSpec
) -> pd.DataFrame:
    """Derive the per-request frame (same row order as ``requests``; no list columns)."""
    n = len(requests)
    sent = numeric(requests, "start_wall")
    lag = scheduled_lag_ms(requests)
    start = sent - lag / 1000.0  # open loop: the scheduled time; closed loop: the send
    e2e = numeric(requests, "e2e_ms") + lag
    ttft = numeric(requests, "ttft_ms") + lag
    ttfb = numeric(requests, "ttfb_ms") + lag
    ok, kinds, cancelled, failed = outcomes(requests)  # failed: the server's failures only
    warmup = boolean(requests, "warmup")
    end = start + e2e / 1000.0

    by_index = position_by_index(windows)
    level_index = numeric(requests, "level_index")
    pos = np.full(n, -1, dtype=np.int64)
    for index, p in by_index.items():
        pos[level_index == index] = p

    w_start = np.array([w.window_start for w in windows] + [np.nan])[pos]
    w_end = np.array([w.end_wall for w in windows] + [np.nan])[pos]
    measured = (pos >= 0) & ~warmup & (start >= w_start) & (start < w_end)
    spillover = (pos >= 0) & ((end > w_end) | cancelled)
    complete = measured & (end <= w_end) & ~cancelled

    tokens = numeric(requests, "completion_tokens")
    tokens = np.where(np.isnan(tokens), chunks.token_sums, tokens)
    tokens = np.where(cancelled & ~(tokens > 0), chunks.token_sums, tokens)  # a cut stream: what it streamed
    decoded = tokens - first_chunk_tokens(chunks, tokens)  # generated after TTFT
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where((ok | cancelled) & (decoded >= 1) & np.isfinite(ttft), (e2e - ttft) / decoded, np.nan)

    def failure_is_inf(values: np.ndarray) -> np.ndarray:
        return np.where(np.isnan(values) & failed, np.inf, values)

    def censored(values: np.ndarray, *metrics: str) -> np.ndarray:
        """Cut requests without a value: +inf when their wait already missed the limit."""
        limit = slo.tightest(*metrics)
        unseen = cancelled & np.isnan(values)
        if limit is None or not unseen.any():
            return values
        return np.where(unseen & (e2e > limit), np.inf, values)

    frame = pd.DataFrame(
        {
            "request_id": text(requests, "request_id"),
            "worker": text(requests, "worker"),
            "level": numeric(requests, "level"),
            "level_index": level_index,
            "pos": pos,
            "start_wall": start,
            "sent_wall": sent,
            "schedule_lag_ms": np.where(lag_known(requests), lag, np.nan),
            "end_wall": end,
            "end_pos": locate(end, windows),
            "ok": ok,
            "failed": failed,
            "cancelled": cancelled,
            "error_kind": kinds,
            "error": text(requests, "error"),
            "token_source": text(requests, "token_source"),
            "warmup": warmup,
            "measured": measured,
            "spillover": spillover,
            "complete": complete,
            "ttft_ms": ttft,
            "ttfb_ms": ttfb,
            "e2e_ms": e2e,
            "tpot_ms": tpot,
            "completion_tokens": tokens,
            "prompt_tokens": numeric(requests, "prompt_tokens"),  # for cost per token (analysis/cost.py)
            "items": numeric(requests, "items"),  # inputs per request (embeddings), NaN for chat/completions
            "chunks": chunks.counts,
            "ttft_sample": np.where(measured, censored(failure_is_inf(ttft), "ttft_ms"), np.nan),
            "ttfb_sample": np.where(measured, censored(failure_is_inf(ttfb), "ttfb_ms"), np.nan),
            "e2e_sample": np.where(
                measured, np.where(failed, np.inf, censored(np.where(cancelled, np.nan, e2e), "e2e_ms")), np.nan
            ),
            "tpot_sample": np.where(measured, np.where(failed, np.inf, tpot), np.nan),
        }
    )
    frame["output_valid"] = validity_column(requests)
    # a broken tool call or schema answer served nobody: never goodput (see output_validity)
    frame["good"] = ok & _meets_limits(frame, slo) & ~(frame["output_valid"].to_numpy() == 0.0)
    return frame


def lag_known(requests: pd.DataFrame) -> np.ndarray:
    """Rows that carry a send lag (open-loop requests that were sent)."""
    if "schedule_lag_ms" not in requests:
        return np.zeros(len(requests), dtype=bool)
    return ~np.isnan(numeric(requests, "schedule_lag_ms"))


def scheduled_lag_ms(requests: pd.DataFrame) -> np.ndarray:
    """Each request's send lag in ms (0 where there is none: closed loop, dropped arrivals)."""
    if "schedule_lag_ms" not in requests:
        return np.zeros(len(requests))
    return np.nan_to_num(numeric(requests, "schedule_lag_ms"), nan=0.0)


def _meets_limits(frame: pd.DataFrame, slo: SloSpec) -> np.ndarray:
    """Per-request SLO test for goodput.

    A single request has no percentiles, so it is held to the tightest limit of
    each metric: TTFT ≤ the tightest TTFT limit, TPOT ≤ the tightest ITL *or*
    TPOT limit (a request's mean time per output token is its ITL averaged),
    e2e ≤ the tightest e2e limit. A missing value (e.g. TPOT of a one-token
    reply) does not fail the request.
    """
    good = np.ones(len(frame), dtype=bool)
    for limit, column in (
        (slo.tightest("ttft_ms"), "ttft_ms"),
        (slo.tightest("ttfb_ms"), "ttfb_ms"),
        (slo.tightest("itl_ms", "tpot_ms"), "tpot_ms"),
        (slo.tightest("e2e_ms"), "e2e_ms"),
    ):
        if limit is None:
            continue
        values = frame[column].to_numpy(dtype=float)
        good &= ~(values > limit)
    return good
