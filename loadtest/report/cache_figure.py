"""The report's prefix-cache figure: the hit rate per level beside TTFT.

A prefix cache that stops hitting under load (the traffic's working set
evicts it) is a common reason for TTFT to break: every miss is a prefill. So
the page plots the two on one x axis, the hit rate (right axis, 0–100%) over
TTFT p50/p95 (left axis), when any level has a hit rate
(``levels[].prefix_cache``, analysis/prefix_cache.py).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from loadtest.analysis.results import Analysis
from loadtest.report.plotting import PCT_COLOURS, concurrency_axis, finite, mark_capacity


def has_prefix_cache(analysis: Analysis) -> bool:
    return any(lv.prefix_cache for lv in analysis.levels)


def prefix_cache_figure(analysis: Analysis) -> go.Figure:
    """TTFT p50/p95 (left) and the prefix-cache hit rate (right) per level."""
    levels = [lv for lv in analysis.levels if lv.status != "no_data"]
    xs = [lv.load for lv in levels]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for pct in ("p50", "p95"):
        fig.add_trace(go.Scatter(x=xs, y=finite(lv.ttft_ms.percentile(pct) for lv in levels), name=f"TTFT {pct}",
                                 mode="lines+markers", line=dict(color=PCT_COLOURS[pct])), secondary_y=False)
    rates = [100.0 * lv.prefix_cache["hit_rate"] if lv.prefix_cache else None for lv in levels]
    sources = [lv.prefix_cache["source"] if lv.prefix_cache else "" for lv in levels]
    fig.add_trace(go.Scatter(x=xs, y=rates, name="prefix-cache hit rate", mode="lines+markers",
                             line=dict(color="#1a7f37", dash="dot"), customdata=sources,
                             hovertemplate="%{y:.1f}% hit (%{customdata})<extra></extra>"), secondary_y=True)
    mark_capacity(fig, analysis)
    fig.update_xaxes(**concurrency_axis(levels))
    fig.update_yaxes(title="TTFT (ms)", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title="hit rate (%)", range=[0, 100], secondary_y=True)
    fig.update_layout(height=420, title="Prefix-cache hit rate beside TTFT")
    return fig
