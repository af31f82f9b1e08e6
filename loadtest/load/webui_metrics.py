"""What the live web UI charts and tabulates per level, by request kind (no Locust import here).

A streamed kind (chat, completions, responses) shows the registry's ``web_ui`` metrics, TTFT and
ITL. A kind that is not streamed (embeddings, rerank, score) has neither: its answer is one JSON
body, with no first token and no gaps between tokens, so those charts would stay empty while
looking like a measurement. It shows the registry's ``web_ui_unary`` metrics instead (end-to-end
latency, the metric its SLO is on), and the page says why, as the HTML report does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from loadtest.client.unary import UNARY_APIS
from loadtest.metric_registry import LABELS, METRICS, PERCENTILES, shown

#: Every percentile any surface of the UI shows, by name and as a percentage (the JSON's keys).
SHOWN_PERCENTILES = {
    pct: PERCENTILES[pct] * 100 for pct in PERCENTILES if any(pct in m.web_ui + m.web_ui_unary for m in METRICS)
}

NOT_STREAMED_NOTE = (
    "target.api is {api}: each answer is one JSON body, with no first token and no gaps between tokens, "
    "so there is no TTFT or ITL to chart; the charts show {labels} per level (the SLO is on it)."
)


@dataclass(frozen=True)
class WebMetrics:
    """The metrics of one run's UI: charted (with their percentiles), in the levels tab, and why."""

    charts: dict[str, tuple[str, ...]]
    table: dict[str, tuple[str, ...]]
    note: str | None = None

    @property
    def labels(self) -> dict[str, str]:
        return {m: LABELS[m] for m in self.charts}

    def title(self) -> str:
        """The charts link's title, e.g. ``Charts: TTFT and ITL per level against the SLOs``."""
        return f"Charts: {' and '.join(self.labels.values())} per level against the SLOs"

    def level_table(self) -> list[dict[str, str]]:
        """The levels tab's columns (Locust's extended table structure)."""
        return [
            {"key": "level", "title": "Level"},
            {"key": "load", "title": "Load"},  # users, req/s or the trace's speedup: live.level_label
            {"key": "status", "title": "Status"},
            {"key": "requests", "title": "Requests"},
            {"key": "errors", "title": "Errors"},
            *({"key": cell_key(m, pct), "title": f"{LABELS[m]} {pct} ms"} for m, pcts in self.table.items() for pct in pcts),
            {"key": "ended", "title": "Ended"},
        ]

    def figures(self, p: Any) -> dict[str, Any]:
        """Requests, errors and each charted metric's percentiles of one level's progress (None: nothing yet)."""
        return {
            "requests": p.requests if p else 0,
            "errors": p.errors if p else 0,
            **{m: _percentiles(p, m) for m in self.charts},
        }


def web_metrics(api: str) -> WebMetrics:
    """The UI's metrics for a run of request kind ``api``."""
    if api in UNARY_APIS:
        unary = {m.name: m.web_ui_unary for m in METRICS if m.web_ui_unary}
        labels = " and ".join(LABELS[m] for m in unary)
        return WebMetrics(unary, unary, NOT_STREAMED_NOTE.format(api=api, labels=labels))
    return WebMetrics({m.name: m.web_ui for m in shown("web_ui")}, {m.name: m.web_ui_table for m in shown("web_ui")})


def cell_key(metric: str, pct: str) -> str:
    """The levels tab's column key of a metric's percentile, e.g. ``ttft_p95``."""
    return f"{metric.removesuffix('_ms')}_{pct}"


def _percentiles(p: Any, metric: str) -> dict[str, float | None]:
    """The shown percentiles of a level's live metric (``ttft_ms`` is sampled as ``ttft``). The record
    writer process computed them (:class:`~loadtest.load.progress.LevelFigures`), or this process
    does after a take-over (:class:`~loadtest.load.progress.LevelProgress`). A percentile that reaches
    the failures (+inf) is None: JSON has no infinity, and a browser refuses the whole answer over one."""
    got = p.percentiles(metric.removesuffix("_ms")) if p else {}
    return {name: round(got[name], 3) if _finite(got.get(name)) else None for name in SHOWN_PERCENTILES}


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
