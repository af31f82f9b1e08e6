"""Report figures for realistic workloads: one curve per request class, TTFT by conversation turn.

Kept apart from :mod:`loadtest.report.html` because they exist only for
scenarios with ``workload.classes`` or ``workload.conversation``; the page
adds them when the analysis has something to show.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from loadtest.analysis.results import Analysis
from loadtest.analysis.slo import METRIC_LABELS
from loadtest.metric_registry import names

CLASS_COLOURS = ("#2f81f7", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#0a7ea4", "#d6336c", "#6e7781")
#: The metrics a per-class subplot may show (the registry's ``per_class`` ones).
_METRICS = names(per_class=True)


def _finite(values):
    return [v if v is not None and math.isfinite(v) else None for v in values]


def has_classes(analysis: Analysis) -> bool:
    return bool(analysis.class_slos)


def has_turns(analysis: Analysis) -> bool:
    return any(lv.ttft_by_turn for lv in analysis.levels)


def class_figure(analysis: Analysis) -> go.Figure:
    """Each class's latency against concurrency, at the percentile its SLO uses, with its own limit.

    One subplot per metric that any class constrains (TTFT, ITL, TPOT, e2e);
    one curve per class; a dashed line in the class's colour marks its limit,
    so the class that crosses its line first is the binding one.
    """
    slos = analysis.class_slos
    metrics = [m for m in _METRICS if any(c.metric == m for spec in slos.values() for c in spec.checks)] or ["ttft_ms"]
    fig = make_subplots(rows=1, cols=len(metrics), subplot_titles=[f"{METRIC_LABELS[m]} (ms)" for m in metrics])
    levels = [lv for lv in analysis.levels if lv.status != "no_data"]
    xs = [lv.concurrency for lv in levels]
    for k, (name, spec) in enumerate(slos.items()):
        colour = CLASS_COLOURS[k % len(CLASS_COLOURS)]
        for col, metric in enumerate(metrics, start=1):
            check = next((c for c in spec.checks if c.metric == metric), None)
            pct = check.percentile if check else "p95"
            ys = _finite(lv.classes[name].metric(metric).percentile(pct) if name in lv.classes else None for lv in levels)
            fig.add_trace(
                go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"{name} {pct}", legendgroup=name,
                           showlegend=col == 1, line=dict(color=colour, dash="solid" if check else "dot"),
                           hovertemplate=f"{name} {pct}: %{{y:.1f}} ms at %{{x}} users<extra></extra>"),
                row=1, col=col,
            )
            if check is not None:
                fig.add_hline(y=check.limit, line=dict(color=colour, dash="dash"),
                              annotation_text=f"{name} SLO {pct} ≤ {check.limit:g}", row=1, col=col)
            fig.update_xaxes(title="concurrent users", row=1, col=col)
            fig.update_yaxes(title="ms", rangemode="tozero", row=1, col=col)
    cap = analysis.capacity
    if cap.concurrency is not None:
        fig.add_vline(x=cap.concurrency, line=dict(color="#1a7f37", dash="dash"))
    if cap.first_failing is not None:
        fig.add_vline(x=cap.first_failing, line=dict(color="#cf222e", dash="dot"))
    fig.update_layout(height=440, title="Per request class (solid: the percentile its SLO uses; dotted: p95, not constrained)")
    return fig


def turn_figure(analysis: Analysis) -> go.Figure:
    """TTFT p50 and p95 against the conversation turn, one curve per level: history costs prefill."""
    fig = go.Figure()
    levels = [lv for lv in analysis.levels if lv.ttft_by_turn]
    for k, lv in enumerate(levels):
        turns = sorted(lv.ttft_by_turn)
        colour = CLASS_COLOURS[k % len(CLASS_COLOURS)]
        for pct, dash in (("p50", "dot"), ("p95", "solid")):
            fig.add_trace(go.Scatter(
                x=turns, y=_finite(lv.ttft_by_turn[t].percentile(pct) for t in turns), mode="lines+markers",
                name=f"{lv.concurrency} users {pct}", line=dict(color=colour, dash=dash),
                hovertemplate=f"{lv.concurrency} users, turn %{{x}}: {pct} %{{y:.1f}} ms<extra></extra>",
            ))
    fig.update_xaxes(title="conversation turn", dtick=1)
    fig.update_yaxes(title="TTFT (ms)", rangemode="tozero")
    fig.update_layout(height=420, title="TTFT by conversation turn (each turn resends the history)")
    return fig
