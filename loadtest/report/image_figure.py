"""The report's images figure: TTFT against the images a request carried.

Images are prefill, so TTFT grows with a request's image count and size; the levels' TTFT
alone mixes requests of every size. Left: TTFT p50 (solid) and p95 (dotted) by image count,
one line per level (``levels[].images.ttft_ms_by_count``). Right: each request's TTFT against
its images' encoded kilobytes, one colour per level (a sample of up to 2000 per level; requests
whose images were URLs, of unknown size, are left out). Shown when the run sent images.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from loadtest.analysis.results import Analysis

_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def has_images(analysis: Analysis) -> bool:
    return any(lv.images for lv in analysis.levels)


def image_figure(analysis: Analysis) -> go.Figure:
    """TTFT by image count (per level) and per-request TTFT against image kilobytes."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("TTFT by images per request (ms)", "TTFT against image size (ms)"))
    levels = [lv for lv in analysis.levels if lv.images]
    for i, lv in enumerate(levels):
        colour = _COLOURS[i % len(_COLOURS)]
        by_count = lv.images["ttft_ms_by_count"]  # type: ignore[index]
        counts = sorted(by_count, key=int)
        for pct, dash in (("p50", "solid"), ("p95", "dot")):
            fig.add_trace(go.Scatter(
                x=[int(c) for c in counts], y=[by_count[c][pct] for c in counts], mode="lines+markers",
                name=f"{lv.label} {pct}", legendgroup=lv.label, line=dict(color=colour, dash=dash),
                customdata=[by_count[c]["n"] for c in counts],
                hovertemplate=f"{lv.label}: %{{x}} images, TTFT {pct} %{{y:.0f}} ms (%{{customdata}} requests)<extra></extra>",
            ), row=1, col=1)
        sizes, ttft = lv.samples.get("image_bytes"), lv.samples.get("image_ttft_ms")
        if sizes is not None and ttft is not None and len(sizes):
            fig.add_trace(go.Scattergl(
                x=sizes / 1024.0, y=ttft, mode="markers", name=f"{lv.label} requests", legendgroup=lv.label,
                marker=dict(color=colour, size=4, opacity=0.5), showlegend=False,
                hovertemplate=f"{lv.label}: %{{x:.0f}} KB, TTFT %{{y:.0f}} ms<extra></extra>",
            ), row=1, col=2)
    fig.update_xaxes(title="images per request", dtick=1, row=1, col=1)
    fig.update_xaxes(title="image bytes per request (KB)", rangemode="tozero", row=1, col=2)
    fig.update_yaxes(title="TTFT (ms)", rangemode="tozero")
    fig.update_layout(height=420)
    return fig
