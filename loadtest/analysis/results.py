"""The analyzer's output types: plain dataclasses, no behaviour beyond small helpers.

They are what the reports consume. Floats use NaN for "no data" and ``inf``
for "failures dominate this percentile"; the JSON writer maps both to null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from loadtest.analysis.slo import SloSpec
from loadtest.client.unary import UNARY_APIS
from loadtest.metric_registry import PERCENTILES

CheckVerdict = Literal["pass", "fail", "uncertain", "no_data"]
LevelStatus = Literal["pass", "fail", "uncertain", "no_data"]
CapacityVerdict = Literal["found", "at_least", "below_minimum", "uncertain", "client_saturated", "host_contended", "no_data"]

#: Percentiles reported for every metric (an SLO may use any of them): the registry's.
REPORTED: tuple[str, ...] = tuple(PERCENTILES)


def fmt_rate(value: float) -> str:
    """A rate (requests/s) as a reader reads it: four significant digits, whole above 1,000.

    ``:g`` printed six: a trace replay's rates are the window's mean rate × the speedup
    ("5.50171 req/s", "7.04444 req/s"), and a refine probe's a bisection's.
    """
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


@dataclass
class Stats:
    """Distribution summary of one metric at one level.

    ``n`` counts every sample, including ``n_failed`` failures entered as +inf.
    Percentiles include the failures; ``mean`` and ``max`` are over the finite
    (observed) values only, since an infinite mean says nothing useful.
    ``ci`` holds a 95% bootstrap interval for each reported percentile.
    """

    n: int = 0
    n_failed: int = 0
    mean: float = math.nan
    max: float = math.nan
    p50: float = math.nan
    p90: float = math.nan
    p95: float = math.nan
    p99: float = math.nan
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)

    def percentile(self, name: str) -> float:
        return float(getattr(self, name))


@dataclass
class Check:
    """One SLO check evaluated on one level."""

    name: str  # "itl_ms.p95" or "error_rate"
    metric: str  # "itl_ms" ... or "error_rate"
    percentile: str | None  # "p95"; None for the error budget
    value: float
    ci: tuple[float, float]
    limit: float
    verdict: CheckVerdict
    n: int
    low_n: bool
    #: Why an ``uncertain`` check is undecided ("too few samples", "interval straddles the limit").
    reason: str = ""
    #: The request class whose SLO this is (None: the whole level, or a run without classes).
    class_name: str | None = None

    @property
    def ratio(self) -> float:
        """value / limit: how far over (> 1) or under (< 1) the limit."""
        if math.isnan(self.value):
            return math.nan
        if self.limit == 0:
            return math.inf if self.value > 0 else 0.0
        return self.value / self.limit


@dataclass
class LevelResult:
    """Everything measured at one concurrency level."""

    index: int
    concurrency: int
    refine: bool
    start_wall: float
    end_wall: float
    window_start: float
    window_s: float
    requests: int  # started inside the measured window
    errors: int
    error_rate: float
    error_rate_ci: tuple[float, float]
    errors_by_kind: dict[str, int]
    completed: int  # succeeded and ended inside the window (throughput numerator)
    complete: int  # started and ended inside the window (e2e/TPOT sample)
    spillover: int  # started in the window, ended after the level ended (or was cancelled at its end)
    cancelled: int  # started in the window, cut by the harness; excluded from requests/errors
    ttft_ms: Stats
    itl_ms: Stats
    tpot_ms: Stats
    e2e_ms: Stats
    ttfb_ms: Stats
    requests_per_s: float
    output_tokens_per_s: float
    goodput_rps: float
    client_saturated: bool
    client: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    status: LevelStatus = "no_data"
    #: How the load stage ran it: {ended, ran_s, verdict, why, looks, extended, looks_taken}.
    decision: dict[str, Any] = field(default_factory=dict)
    #: Small subsample of finite TTFT/ITL values for plots (not serialized).
    samples: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: The same metrics for each request class alone, judged by that class's SLO.
    classes: dict[str, "LevelResult"] = field(default_factory=dict)
    #: TTFT of the requests at each conversation turn (1, 2, …): history makes later turns longer.
    ttft_by_turn: dict[int, Stats] = field(default_factory=dict)
    #: Open loop: the offered rate (requests/s); None for a concurrency level.
    rate_rps: float | None = None
    #: Trace replay: the level's speedup of the trace window (rate_rps / the window's mean rate).
    speedup: float | None = None
    #: The server's prefix-cache hit rate here, and its source (analysis/prefix_cache.py); None when unknown.
    prefix_cache: dict | None = None
    #: Open loop: offered/sent/completed rates, send lag, mean in flight (:mod:`open_loop`).
    open_loop: dict[str, Any] | None = None
    #: The client's timing could not be trusted because the host was busy, not the client (:mod:`host_contention`).
    host_contended: bool = False
    #: ``client_saturated`` only because a verdict sits within the client's timing error of its limit, while
    #: the client's own self-check found it not busy (:mod:`client_error`): more workers would not help.
    client_near_limit: bool = False
    #: Share of valid structured outputs (tool-call JSON, schema output) among the checked
    #: requests that succeeded; None when the workload asked for no structure (:mod:`output_validity`).
    valid_output_rate: float | None = None
    valid_output_checked: int = 0
    #: Wilson interval of ``valid_output_rate`` at the run's confidence (None when nothing was checked).
    valid_output_ci: tuple[float, float] | None = None
    #: Prompt tokens and inputs of the successful requests served in the window (each by the share of its
    #: life inside it, as ``requests_per_s``), per second
    #: (the throughput of embeddings; items None for chat/completions).
    input_tokens_per_s: float | None = None
    items_per_s: float | None = None
    #: Where ``requests_per_s`` and ``goodput_rps`` were counted (wall s): the window, or at a rate
    #: the window shifted by a request's life (:mod:`served_span`); None for a level built elsewhere.
    served_span: tuple[float, float] | None = None
    #: With workload.images: images and bytes per request, and TTFT by image count (:mod:`images`).
    images: dict[str, Any] | None = None
    #: The stop that ended this level before it was decided, in words ("an interrupt (SIGINT)",
    #: :mod:`loadtest.analysis.stop`); None for a level that ended by itself. Not in summary.json
    #: (run.json's ``stopped_by`` and the level's empty ``decision`` say it there).
    cut_short_by: str | None = None

    @property
    def load(self) -> float:
        """The level's load: its rate in open loop, its concurrency in closed loop."""
        return self.rate_rps if self.rate_rps is not None else float(self.concurrency)

    @property
    def load_text(self) -> str:
        """The load as a table cell or a figure's label prints it: ``"8"`` users, ``"5.502"`` req/s."""
        return fmt_rate(self.rate_rps) if self.rate_rps is not None else str(self.concurrency)

    @property
    def label(self) -> str:
        """``"8 concurrent users"`` or ``"12.5 req/s"``: how to name the level to a reader."""
        if self.speedup is not None:
            return f"{self.speedup:g}× the traffic of the trace window"
        if self.rate_rps is not None:
            return f"{fmt_rate(self.rate_rps)} req/s"
        return f"{self.concurrency} concurrent user" + ("" if self.concurrency == 1 else "s")

    @property
    def passed(self) -> bool | None:
        """True only when every check passes; False when one fails or any is undecided; None without data.

        An undecided level is not a pass: capacity counts only levels that hold
        with confidence (see :mod:`capacity`).
        """
        if self.status == "no_data":
            return None
        return self.status == "pass"

    def metric(self, name: str) -> Stats:
        return getattr(self, name)

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)


@dataclass
class Capacity:
    """The answer: how many concurrent users the endpoint holds within the SLOs."""

    concurrency: int | None
    verdict: CapacityVerdict
    message: str
    first_failing: int | None = None
    binding: str | None = None  # check name that failed first, e.g. "itl_ms.p95"
    binding_value: float | None = None
    binding_limit: float | None = None
    binding_ratio: float | None = None  # value / limit at the first failing level
    requests_per_s: float | None = None  # at capacity
    output_tokens_per_s: float | None = None
    goodput_rps: float | None = None
    #: At capacity: prompt tokens/s and inputs/s (embeddings' throughput; items None for chat).
    input_tokens_per_s: float | None = None
    items_per_s: float | None = None
    certain_concurrency: int | None = None  # same as ``concurrency`` (kept for readers of older summaries)
    #: The optimistic reading: the highest level below the first *failing* one, counting
    #: undecided levels as holding. Equals ``concurrency`` when every level was decided.
    upper_bound: int | None = None
    max_tested: int | None = None
    uncertain_levels: list[int] = field(default_factory=list)
    saturated_levels: list[int] = field(default_factory=list)
    #: Levels whose timing the busy host (not the client) made untrustworthy.
    contended_levels: list[int] = field(default_factory=list)
    #: The class whose SLO check bound the capacity (None without classes, or for the overall error budget).
    binding_class: str | None = None
    #: The model the binding class's requests named (its ``model`` override, else target.model).
    binding_model: str | None = None
    #: Each class's own capacity under its own SLO (what it would hold if it were alone in failing).
    classes: dict[str, "Capacity"] = field(default_factory=dict)
    #: Open loop: the capacity as a rate (requests/s), and the same readings as rates
    #: (``concurrency`` and its siblings stay None in this mode).
    rate_rps: float | None = None
    first_failing_rate_rps: float | None = None
    upper_bound_rate_rps: float | None = None
    max_tested_rate_rps: float | None = None
    #: Trace replay: the capacity as a speedup of the trace window (and its readings as speedups).
    speedup: float | None = None
    first_failing_speedup: float | None = None
    upper_bound_speedup: float | None = None
    max_tested_speedup: float | None = None
    #: Open loop: mean requests in flight at the capacity rate (Little's law: rate × time in system).
    mean_in_flight: float | None = None
    #: Open loop: the rates the capacity level's measured window was offered and sent (its arrivals are
    #: drawn at random, so a short window's differ from ``rate_rps``: analysis/offered.py).
    offered_rate_rps: float | None = None
    sent_rate_rps: float | None = None


@dataclass
class Analysis:
    """The result of :func:`loadtest.analysis.analyze`."""

    name: str
    target: dict[str, Any]
    slo: SloSpec
    levels: list[LevelResult]  # sorted by concurrency
    capacity: Capacity
    warnings: list[str]
    token_source: dict[str, int]  # successful requests per token-count source
    warmup_s: float
    run: dict[str, Any]  # run.json as read
    #: Per-request derived frame (see :mod:`loadtest.analysis.frame`), no list columns.
    requests: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    itl_unit: str = "per_token"
    #: Two-sided confidence of every interval and verdict (see :mod:`verdict`).
    confidence: float = 0.95
    #: The server's own view (:mod:`loadtest.analysis.server`); None when the run did not scrape.
    server: Any = None
    #: Thresholds from capacity (:mod:`loadtest.analysis.autoscaling`).
    autoscaling: Any = None
    #: Each request class's SLO (empty without classes).
    class_slos: dict[str, SloSpec] = field(default_factory=dict)
    #: Requests per prompt-token source: "usage" (the server's count) or "estimate" (word count).
    prompt_token_source: dict[str, int] = field(default_factory=dict)
    #: The target stopped answering during the run (:mod:`loadtest.analysis.target_lost`), else None.
    target_lost: Any = None
    #: The prompt length asked for against the server's count (:mod:`loadtest.analysis.prompt_length`), else None.
    prompt_length: Any = None

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    @property
    def unary(self) -> bool:
        """Were the requests answered in one body (embeddings, rerank, score), not streamed?

        Decided here once because every output must speak the same kind: a unary run has no first
        token and no token gaps, and its throughput is input tokens/s and items/s, not output
        tokens/s (which are 0). The report, the terminal and the cost line each asked the target
        themselves, and the ones that did not spoke of a chat stream ("0 output tok/s").
        """
        return (self.target or {}).get("api") in UNARY_APIS
