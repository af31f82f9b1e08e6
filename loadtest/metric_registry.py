"""The metric registry: every metric loadtest reports, defined once.

Each :class:`Metric` says what the metric is (name, label, unit, the definition
``summary.json`` prints), what one sample of it is (a request, a gap between
chunks, or a whole measured window), whether an SLO may constrain it, and
where it is shown. Everything else derives from this table:

* the scenario's ``slo:`` keys and the ``--slo METRIC.PCT=LIMIT`` parser
  (:mod:`loadtest.analysis.slo`): the metrics with ``slo=True``;
* the analysis (:mod:`loadtest.analysis.metrics`): a latency distribution per
  level for every ``kind == "latency"`` metric;
* ``summary.json``: a stats block per latency metric, and ``definitions``;
* the terminal table, the report's table and figures, and the live web UI:
  the metrics whose flags name them, at the percentiles they list.

Adding a metric is one :class:`Metric` here plus its computation (a column of
``requests.parquet`` for a per-request metric, see ``sample_column``).

This module imports nothing from loadtest, so every layer (scenario, analysis,
report, load) may import it without a circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: The percentiles loadtest reports for every latency metric, and that an SLO may use, with the
#: quantile each one means. The one definition: the analysis, the SLO parser, summary.json and
#: the web UI all read it.
PERCENTILES: dict[str, float] = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}

#: How the percentiles are computed (summary.json ``definitions.percentiles``).
PERCENTILE_DEFINITION = (
    "linear interpolation (numpy default); CIs resample blocks of time (shared decode steps and "
    "multi-token chunks stay together) at the run's `confidence` (1 - 0.05/K for K looks per level); "
    "too few samples for a percentile give an unbounded upper limit (never a pass)"
)

#: The SLO key of the error budget (a rate, not a latency: ``slo.max_error_rate``, ``--slo max_error_rate=``).
ERROR_BUDGET = "max_error_rate"

#: The SLO key of the least share of valid structured outputs (``slo.min_valid_output_rate``,
#: ``--slo min_valid_output_rate=``): a level whose tool calls or schema answers break fails it.
VALID_OUTPUT_MINIMUM = "min_valid_output_rate"

#: What one sample of a metric is: a request, a gap between content chunks, or a measured window.
Per = Literal["request", "gap", "window"]


@dataclass(frozen=True)
class Metric:
    """One reported metric and where it appears."""

    #: The key in summary.json, the scenario's ``slo:`` and ``--slo``, e.g. ``"ttft_ms"``.
    name: str
    #: Human name in messages and headings ("the p95 ITL is 130 ms").
    label: str
    #: Unit of a value, as a heading shows it.
    unit: str
    #: summary.json ``definitions[name]``: what is measured, over which requests.
    definition: str
    #: ``latency`` metrics get percentiles with intervals per level; ``rate`` metrics one value per level.
    kind: Literal["latency", "rate"]
    per: Per
    #: May a latency SLO constrain it (``slo: {name: {p95: …}}``, ``--slo name.p95=…``)?
    slo: bool = False
    #: The requests.parquet column of one sample (per-request latency metrics; None: derived otherwise).
    sample_column: str | None = None
    #: A column of the terminal's per-level table (at the percentile the SLO uses, else p95).
    terminal: bool = False
    #: A column of the terminal's per-class table, and a subplot of the report's per-class figure.
    per_class: bool = False
    #: A subplot of the report's "Latency against concurrency".
    report_figure: bool = False
    #: A subplot of the report's knee and distribution figures (latency against throughput, box plots).
    report_knee: bool = False
    #: Percentiles shown in the report's per-level table (empty: not there).
    report_table: tuple[str, ...] = ()
    #: Percentiles shown in the live web UI's charts and its JSON (empty: not there).
    web_ui: tuple[str, ...] = ()
    #: Of those, the percentiles in the web UI's levels tab (a narrower table).
    web_ui_table: tuple[str, ...] = ()
    #: Percentiles the live web UI charts (and tabulates) instead for a kind that is not streamed
    #: (embeddings, rerank, score), where the metrics above have no samples.
    web_ui_unary: tuple[str, ...] = ()
    #: Measured for an answer that is not streamed (embeddings): a column of its terminal table, an
    #: SLO it may have; False for the metrics that need a stream (first token, gaps between tokens).
    unary: bool = False
    #: Counts the wait in the server's queue from the send (open loop: from the scheduled time), so
    #: a queue that grows through a level shows in it first (analysis/open_loop.py's short-level warning).
    queue_wait: bool = False
    #: Grows with the decode step (each token's time in the batch), not with a wait before the first
    #: token: a limit on it is the decode step's (analysis/capacity_limit.py).
    decode_step: bool = False

    @property
    def short_label(self) -> str:
        """The label for a narrow table column."""
        return "e2e" if self.name == "e2e_ms" else self.label


METRICS: tuple[Metric, ...] = (
    Metric(
        "ttft_ms", "TTFT", "ms",
        "time from send to the first chunk with generated content; per request that started in the "
        "measured window; a failed request without a first token counts as +inf",
        kind="latency", per="request", slo=True, sample_column="ttft_sample", queue_wait=True,
        terminal=True, per_class=True, report_figure=True, report_knee=True,
        report_table=("p50", "p95", "p99"), web_ui=("p50", "p95", "p99"), web_ui_table=("p50", "p95"),
    ),
    Metric(
        "itl_ms", "ITL", "ms per token",
        "gap between consecutive content chunks, divided evenly over the later chunk's tokens (per "
        "token); assigned to the window in which the chunk arrived; a stream that broke adds one +inf sample",
        kind="latency", per="gap", slo=True, decode_step=True,
        terminal=True, per_class=True, report_figure=True, report_knee=True,
        report_table=("p50", "p95", "p99"), web_ui=("p50", "p95", "p99"), web_ui_table=("p50", "p95"),
    ),
    Metric(
        "tpot_ms", "TPOT", "ms",
        "(e2e - ttft) / (completion_tokens - first chunk's tokens) per request with tokens after its "
        "first chunk that started in the measured window (one token a chunk: completion_tokens - 1); "
        "failed such requests count as +inf",
        kind="latency", per="request", slo=True, sample_column="tpot_sample", decode_step=True,
        terminal=True, per_class=True, report_figure=True, report_table=("p95",),
    ),
    Metric(
        "e2e_ms", "end-to-end latency", "ms",
        "send to last byte, for requests that started in the measured window (also those that ended after "
        "it); failures count as +inf; a request the harness cut after waiting past the e2e limit counts as +inf",
        kind="latency", per="request", slo=True, sample_column="e2e_sample", queue_wait=True,
        per_class=True, report_figure=True, report_table=("p95",), unary=True, web_ui_unary=("p50", "p95", "p99"),
    ),
    Metric(
        "ttfb_ms", "TTFB", "ms",
        "send to the first response byte; same population as ttft_ms",
        kind="latency", per="request", slo=True, sample_column="ttfb_sample", unary=True,
    ),
    Metric(
        "requests_per_s", "requests/s", "requests/s",
        "successful requests served in the measured window, each counted by the share of its life (send to "
        "end; at a rate, first token to end, not its wait in a growing queue) inside the window, per second of window",
        kind="rate", per="window",
    ),
    Metric(
        "output_tokens_per_s", "output tokens/s", "tokens/s",
        "output tokens whose chunk arrived in the measured window, per second of window",
        kind="rate", per="window",
    ),
    Metric(
        "goodput_rps", "goodput", "requests/s",
        "successful requests served in the window (counted as requests_per_s counts them) that met every per-request limit "
        "(ttft <= tightest TTFT limit, ttfb <= tightest TTFB limit, tpot <= tightest ITL/TPOT limit, "
        "e2e <= tightest e2e limit), per second",
        kind="rate", per="window",
    ),
    Metric(
        "valid_output_rate", "valid output rate", "fraction",
        "with workload.tools or response_format: answers that parse and validate (tool-call JSON against "
        "the tool's parameters, output against the schema) / successful checked requests that started in "
        "the measured window; Wilson CI (valid_output_rate_ci); null when nothing was checked",
        kind="rate", per="request",
    ),
    Metric(
        "error_rate", "error rate", "fraction",
        "failed / all requests that started in the measured window (warmup excluded); Wilson interval at the run's confidence",
        kind="rate", per="window",
    ),
)

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}


def metric(name: str) -> Metric:
    """The registry entry of ``name`` (KeyError for a name that is not a metric)."""
    return BY_NAME[name]


def names(**flags: object) -> tuple[str, ...]:
    """The names of the metrics whose attributes equal ``flags``, in registry order.

    ``names(slo=True)`` → the SLO metrics; ``names(kind="latency")`` → those with percentiles.
    """
    return tuple(m.name for m in METRICS if all(getattr(m, k) == v for k, v in flags.items()))


def shown(where: str) -> tuple[Metric, ...]:
    """The metrics a surface shows (``where`` is a flag: terminal, per_class, report_figure, …, web_ui)."""
    return tuple(m for m in METRICS if getattr(m, where))


#: Latency metrics: percentiles with intervals per level in the analysis and summary.json.
LATENCY_METRICS: tuple[str, ...] = names(kind="latency")
#: Metrics a latency SLO may constrain (the scenario's ``slo:`` keys beside max_error_rate, and ``--slo``).
SLO_METRICS: tuple[str, ...] = names(slo=True)
#: Human names by metric name.
LABELS: dict[str, str] = {m.name: m.label for m in METRICS}
