"""The client's latency against wall time, for the report's time plots of the server's signals.

Shared by the server view and the fleet view, so both put the same client lines beside what the
server(s) reported.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from loadtest.analysis.results import Analysis


#: Time bins for the client latency line (medians per bin).
LATENCY_BINS = 300
SIGNAL_COLOURS = ["#2f81f7", "#cf222e", "#8250df", "#bf8700", "#1a7f37", "#57606a", "#e16f24", "#0969da"]


def origin_of(analysis: Analysis) -> float:
    started = analysis.run.get("started_wall")
    if started is not None:
        return float(started)
    return min((lv.start_wall for lv in analysis.levels), default=0.0)


def _binned_median(t: np.ndarray, v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    idx = np.searchsorted(edges, t, side="right") - 1
    out = np.full(len(edges) - 1, np.nan)
    for i in np.unique(idx[(idx >= 0) & (idx < len(out))]):
        out[i] = float(np.median(v[idx == i]))
    return out


def add_client_latency(fig: go.Figure, analysis: Analysis, origin: float, row: int) -> None:
    """The client's TTFT (by send time) and TPOT (by end time), medians per time bin, on ``row``."""
    frame = analysis.requests
    if len(frame):
        start = frame["start_wall"].to_numpy(dtype=float) - origin
        end = frame["end_wall"].to_numpy(dtype=float) - origin
        finite = start[np.isfinite(start)]
        if len(finite):
            lo, hi = float(finite.min()), float(np.nanmax(end)) if np.isfinite(end).any() else float(finite.max())
            width = max(1.0, (hi - lo) / LATENCY_BINS)
            edges = np.arange(lo, hi + width, width)
            if len(edges) >= 2:
                centres = np.round((edges[:-1] + edges[1:]) / 2, 2)
                ttft = _binned_median(start, frame["ttft_ms"].to_numpy(dtype=float), edges)
                tpot = _binned_median(end, frame["tpot_ms"].to_numpy(dtype=float), edges)
                fig.add_trace(go.Scatter(x=centres, y=ttft, name="TTFT (by send time)", mode="lines",
                                         line=dict(color="#bf8700"), connectgaps=False), row=row, col=1)
                fig.add_trace(go.Scatter(x=centres, y=tpot, name="TPOT ≈ ITL (by end time)", mode="lines",
                                         line=dict(color="#8250df"), connectgaps=False), row=row, col=1)
