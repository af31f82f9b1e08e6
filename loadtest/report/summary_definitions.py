"""summary.json's ``definitions``: what each figure in the file means, in words, for a reader of the JSON alone.

Every metric's definition comes from the registry (:mod:`loadtest.metric_registry`); the rest are
the file's other terms. Kept apart from :mod:`loadtest.report.summary`, which builds the figures.
"""

from __future__ import annotations

from loadtest.metric_registry import METRICS, PERCENTILE_DEFINITION

#: summary.json ``definitions``: every metric's from the registry, then the rest of the file's terms.
DEFINITIONS = {
    **{m.name: m.definition for m in METRICS},
    "cancelled": "requests the harness ended (users stopped at a level change or the end of the run): "
    "not errors; censored at their wait: +inf for a metric whose tightest limit the wait already exceeded, "
    "else left out; counted as spillover",
    "token_source": "token-count source per successful request (usage, continuous_usage, or one per chunk)",
    "prompt_token_source": "prompt-token source per successful request: usage (the server's usage.prompt_tokens) or "
    "estimate (whitespace-separated words sent, when the server reported no usage) or trace (the trace row's "
    "input length, in trace replay without usage)",
    "prompt_tokens": "mean prompt tokens per successful request: asked (the workload's own count: one-token words "
    "sent, or the trace rows' lengths) against counted (the server's usage.prompt_tokens over the same requests)",
    "classes": "each request class analyzed alone with its own SLO; a level passes only if every class "
    "passes and the overall error budget holds",
    "ttft_by_turn": "TTFT of the requests at each conversation turn (history grows with every turn)",
    "percentiles": PERCENTILE_DEFINITION,
    "server": "per level, each known server signal (server_metrics.parquet, one value per scrape, series of "
    "one metric summed, or for cache fractions the maximum) over the scrapes inside the measured window",
    "autoscaling": "threshold = a signal's p50 at the capacity level x (1 - headroom); waiting requests: 1 when "
    "none typically waits up to capacity; headroom from --headroom, or 1 - (1 + growth/min)^(-scale_up_s/60)",
    "open_loop": "rate levels (load.rates): arrivals drawn in advance (poisson/constant/gamma); TTFT, TTFB and e2e "
    "measured from each request's scheduled time; offered/sent/completed per second of measured window; an arrival "
    "finding max_in_flight requests in flight fails as 'dropped'; more than 1% (and at least 3) of sends over 10 ms late marks the level "
    "client_saturated; capacity.rate_rps is the highest rate such that every rate up to it passes",
    "decode_fit": "step(n) = max(fixed + per_seq x n, compute_per_seq x n) fitted to each closed-loop level's median ITL "
    "(n: the server's running count where scraped, else the users); knee where the lines cross (analysis/decode_fit.py)",
    "capacity_limit": "at the first failing level: errors (the error budget failed first), decode_step (ITL or TPOT), "
    "else TTFT or e2e with: slots (the server's waiting count p50 >= 1), queue_or_prefill (no waiting count scraped, "
    "and this client's requests in the server's batch, median over the window, at least one short of the users), "
    "prefill (no queue, the first token over 3 decode steps at the median) or first_step (within 3); for a rate level "
    "users is the mean requests in flight",
    "bound": "per level: memory | compute | overhead from the roofline floors when hardware: and model: are known "
    "(overhead: measured above 3 x the higher floor), else memory below the fit's knee and compute past it (basis: fit)",
    "cost": "usd_per_hour divided by what the capacity level served within the SLO per hour (goodput: requests that met "
    "every per-request limit, and their tokens); forecast: replicas = ceil(load / (capacity x (1 - headroom))) per hour",
    "null": "null means no data, or, for a percentile, that failures (+inf) reach it (see n_failed)",
}
