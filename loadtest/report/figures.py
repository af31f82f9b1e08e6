"""The figures of ``report.html``: latency, throughput, knee, distributions and timeline.

Each takes the :class:`~loadtest.analysis.results.Analysis` and returns a plotly
figure; :mod:`loadtest.report.html` places them on the page with their notes.
Figure data is kept small (≤ 2000 points per level and metric for distributions,
≤ 1500 time bins for the timeline), so a 100k-request run stays well under 8 MB.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from loadtest.analysis.results import Analysis
from loadtest.analysis.slo import METRIC_LABELS
from loadtest.metric_registry import BY_NAME, names
from loadtest.report.plotting import (
    PCT_COLOURS,
    STATUS_COLOURS,
    concurrency_axis,
    finite,
    level_steps,
    load_words,
    mark_capacity,
    rgba,
)


TIMELINE_BINS = 1500


def latency_figure(analysis: Analysis) -> go.Figure:
    """TTFT, ITL, TPOT and e2e percentiles against concurrency, with SLO limits and CI bands."""
    metrics = list(names(report_figure=True))
    fig = make_subplots(
        rows=(len(metrics) + 1) // 2,
        cols=2,
        subplot_titles=[f"{METRIC_LABELS[m]} ({_unit(m)})" for m in metrics],
        horizontal_spacing=0.08,
        vertical_spacing=0.14,
    )
    levels = [lv for lv in analysis.levels if lv.status != "no_data"]
    xs = [lv.load for lv in levels]
    for i, metric in enumerate(metrics):
        row, col = i // 2 + 1, i % 2 + 1
        checked = {c.percentile for c in analysis.slo.checks if c.metric == metric}
        for pct in ("p50", "p95", "p99"):
            colour = PCT_COLOURS[pct]
            if pct in checked:
                lo = finite(lv.metric(metric).ci.get(pct, (math.nan, math.nan))[0] for lv in levels)
                hi = finite(lv.metric(metric).ci.get(pct, (math.nan, math.nan))[1] for lv in levels)
                fig.add_trace(
                    go.Scatter(x=xs, y=hi, mode="lines", line=dict(width=0), showlegend=False, hoverinfo="skip",
                               legendgroup=pct),
                    row=row, col=col,
                )
                fig.add_trace(
                    go.Scatter(x=xs, y=lo, mode="lines", line=dict(width=0), fill="tonexty",
                               fillcolor=rgba(colour, 0.18), name=f"{pct} CI", legendgroup=pct,
                               showlegend=i == 0, hoverinfo="skip"),
                    row=row, col=col,
                )
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=finite(lv.metric(metric).percentile(pct) for lv in levels),
                    mode="lines+markers",
                    name=pct,
                    legendgroup=pct,
                    showlegend=i == 0,
                    line=dict(color=colour),
                    hovertemplate=f"{pct}: %{{y:.1f}} ms at %{{x}} {load_words(levels)[1]}<extra></extra>",
                ),
                row=row, col=col,
            )
        for check in analysis.slo.checks:
            if check.metric == metric:
                fig.add_hline(
                    y=check.limit, line=dict(color=PCT_COLOURS.get(check.percentile, "#000"), dash="dash"),
                    annotation_text=f"SLO {check.percentile} ≤ {check.limit:g}", row=row, col=col,
                )
        mark_capacity(fig, analysis, legend=i == 0, row=row, col=col)
        fig.update_xaxes(**concurrency_axis(levels), row=row, col=col)
        fig.update_yaxes(title="ms", rangemode="tozero", row=row, col=col)
    fig.update_layout(height=720, title=f"Latency against {load_words(levels)[2]}")
    return fig


def throughput_figure(analysis: Analysis) -> go.Figure:
    """Requests/s and goodput, and on the right axis the tokens: output tokens/s, or for a unary
    run (embeddings, rerank, score: no output tokens) the input tokens/s it was sent."""
    levels = [lv for lv in analysis.levels if lv.status != "no_data"]
    xs = [lv.load for lv in levels]
    tokens, attr = ("input tokens/s", "input_tokens_per_s") if analysis.unary else ("output tokens/s", "output_tokens_per_s")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=xs, y=finite(lv.requests_per_s for lv in levels), name="requests/s",
                             mode="lines+markers"), secondary_y=False)
    fig.add_trace(go.Scatter(x=xs, y=finite(lv.goodput_rps for lv in levels), name="goodput (requests/s within SLO)",
                             mode="lines+markers", line=dict(color="#1a7f37")), secondary_y=False)
    fig.add_trace(go.Scatter(x=xs, y=finite(getattr(lv, attr) for lv in levels), name=tokens,
                             mode="lines+markers", line=dict(dash="dot", color="#8250df")), secondary_y=True)
    mark_capacity(fig, analysis)
    fig.update_xaxes(**concurrency_axis(levels))
    fig.update_yaxes(title="requests/s", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title=tokens, rangemode="tozero", secondary_y=True)
    fig.update_layout(height=420, title=f"Throughput and goodput against {load_words(levels)[2]}")
    return fig


def knee_figure(analysis: Analysis) -> go.Figure:
    """Latency against delivered throughput: where more load stops buying tokens/s."""
    levels = [lv for lv in analysis.levels if lv.status != "no_data"]
    knee = names(report_knee=True)
    fig = make_subplots(rows=1, cols=len(knee), subplot_titles=[f"p95 {METRIC_LABELS[m]} ({BY_NAME[m].unit})" for m in knee])
    for col, metric in enumerate(knee, start=1):
        fig.add_trace(
            go.Scatter(
                x=finite(lv.output_tokens_per_s for lv in levels),
                y=finite(lv.metric(metric).p95 for lv in levels),
                text=[lv.load_text for lv in levels],
                # refine probes sit close together: their label is in the hover only
                texttemplate=["" if lv.refine else "%{text}" for lv in levels],
                mode="lines+markers+text",
                textposition="top center",
                marker=dict(color=[STATUS_COLOURS.get(lv.status, "#000") for lv in levels], size=9),
                line=dict(color="#6e7781"),
                showlegend=False,
                hovertemplate=f"%{{text}} {load_words(levels)[1]}: %{{x:.0f}} tok/s, p95 %{{y:.1f}} ms<extra></extra>",
            ),
            row=1, col=col,
        )
        for check in analysis.slo.checks:
            if check.metric == metric and check.percentile == "p95":
                fig.add_hline(y=check.limit, line=dict(color="#cf222e", dash="dash"),
                              annotation_text=f"SLO ≤ {check.limit:g}", row=1, col=col)
        fig.update_xaxes(title="output tokens/s", rangemode="tozero", row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col)
    fig.update_layout(height=420, title=f"Latency against throughput (labels: {load_words(levels)[0]}; colour: verdict)")
    return fig


def distribution_figure(analysis: Analysis) -> go.Figure:
    knee = names(report_knee=True)
    fig = make_subplots(rows=1, cols=len(knee), subplot_titles=[f"{METRIC_LABELS[m]} ({BY_NAME[m].unit})" for m in knee])
    for col, metric in enumerate(knee, start=1):
        for lv in analysis.levels:
            values = lv.samples.get(metric)
            if values is None or not len(values):
                continue
            fig.add_trace(
                go.Box(
                    y=np.round(np.asarray(values, dtype=float), 2),
                    name=lv.load_text,
                    boxpoints=False,
                    marker_color=STATUS_COLOURS.get(lv.status, "#000"),
                    showlegend=False,
                ),
                row=1, col=col,
            )
        fig.update_xaxes(title=load_words(analysis.levels)[0], type="category", row=1, col=col)
        fig.update_yaxes(title="ms", row=1, col=col)
    fig.update_layout(height=440, title="Per-level distributions (subsample of successful samples; failures not shown)")
    return fig


def timeline_figure(analysis: Analysis) -> go.Figure:
    """Active concurrency as steps, requests and errors per second, warmup shaded."""
    frame = analysis.requests
    origin = analysis.run.get("started_wall")
    starts_all = [lv.start_wall for lv in analysis.levels]
    if origin is None:
        origin = min(starts_all) if starts_all else (float(frame["start_wall"].min()) if len(frame) else 0.0)
    origin = float(origin)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    in_run = sorted(analysis.levels, key=lambda lv: lv.start_wall)
    if in_run:
        xs, ys = level_steps(in_run, origin)
        fig.add_trace(go.Scatter(x=xs, y=ys, name=load_words(in_run)[0], mode="lines", line_shape="hv",
                                 line=dict(color="#6e7781")), secondary_y=True)
        for lv in in_run:
            if lv.window_start > lv.start_wall:
                fig.add_vrect(x0=lv.start_wall - origin, x1=lv.window_start - origin, fillcolor="#d0d7de",
                              opacity=0.35, line_width=0, layer="below")
    if len(frame):
        start = frame["start_wall"].to_numpy(dtype=float) - origin
        valid = np.isfinite(start)
        if valid.any():
            lo, hi = float(np.min(start[valid])), float(np.max(start[valid]))
            width = max(1.0, math.ceil((hi - lo) / TIMELINE_BINS)) if hi > lo else 1.0
            edges = np.arange(math.floor(lo), hi + width, width)
            if len(edges) < 2:
                edges = np.array([lo, lo + width])
            centres = (edges[:-1] + edges[1:]) / 2
            failed = frame["failed"].to_numpy(dtype=bool)
            total, _ = np.histogram(start[valid], bins=edges)
            errors, _ = np.histogram(start[valid & failed], bins=edges)
            fig.add_trace(go.Scatter(x=np.round(centres, 2), y=total / width, name="requests/s (by start)",
                                     mode="lines", line=dict(color="#2f81f7")), secondary_y=False)
            fig.add_trace(go.Bar(x=np.round(centres, 2), y=errors / width, name="errors/s", marker_color="#cf222e",
                                 opacity=0.7), secondary_y=False)
    fig.update_xaxes(title="seconds since start (grey: warmup, not measured)")
    fig.update_yaxes(title="per second", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title=load_words(analysis.levels)[0], rangemode="tozero", secondary_y=True)
    fig.update_layout(height=400, title="Run timeline", bargap=0)
    return fig



def _unit(metric: str) -> str:
    """A subplot title's unit: ``ms``, or ``ms, per token`` for ITL."""
    return BY_NAME[metric].unit.replace("ms per token", "ms, per token")
