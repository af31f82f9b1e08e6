"""What the live web UI charts per request kind: TTFT and ITL when streamed, e2e when not (and why).

An embeddings, rerank or score answer is one JSON body: it has no first token and no gaps between
tokens, so TTFT/ITL charts would stay empty while looking like a measurement. The UI charts the
registry's ``web_ui_unary`` metrics (end-to-end latency, the metric such an SLO is on) instead,
and says why, as the HTML report does.
"""

from __future__ import annotations

import pytest

from loadtest.load.progress import LevelProgress
from loadtest.load.webui_metrics import SHOWN_PERCENTILES, web_metrics
from loadtest.metric_registry import LABELS, METRICS, shown


@pytest.mark.parametrize("api", ["chat", "completions", "responses"])
def test_a_streamed_kind_charts_the_registrys_web_ui_metrics(api):
    metrics = web_metrics(api)
    assert metrics.charts == {m.name: m.web_ui for m in shown("web_ui")} and metrics.note is None
    assert metrics.table == {m.name: m.web_ui_table for m in shown("web_ui")}
    assert metrics.title() == f"Charts: {' and '.join(m.label for m in shown('web_ui'))} per level against the SLOs"


@pytest.mark.parametrize("api", ["embeddings", "rerank", "score"])
def test_a_kind_that_is_not_streamed_charts_e2e_and_says_why(api):
    metrics = web_metrics(api)
    unary = [m for m in METRICS if m.web_ui_unary]
    assert unary and all(m.unary for m in unary)  # only what such an answer has
    assert set(metrics.charts) == {m.name for m in unary} and not set(metrics.charts) & {m.name for m in shown("web_ui")}
    assert f"target.api is {api}" in metrics.note and "no TTFT or ITL" in metrics.note
    assert [c["key"] for c in metrics.level_table()][5:-1] == [
        f"{m.name.removesuffix('_ms')}_{pct}" for m in unary for pct in m.web_ui_unary]
    assert metrics.labels == {m.name: LABELS[m.name] for m in unary}


def test_a_levels_figures_are_its_e2e_percentiles():
    level = LevelProgress(4)
    level.requests, level.errors = 10, 1
    level.e2e.extend(float(v) for v in range(1, 101))
    level.ttft.extend([5.0])  # never filled for such a kind; and not charted even if it were
    figures = web_metrics("embeddings").figures(level)
    assert figures["requests"] == 10 and figures["errors"] == 1 and "ttft_ms" not in figures
    assert set(figures["e2e_ms"]) == set(SHOWN_PERCENTILES)
    assert figures["e2e_ms"]["p50"] == pytest.approx(50.5) and figures["e2e_ms"]["p99"] == pytest.approx(99.01)
    empty = web_metrics("rerank").figures(None)
    assert empty["requests"] == 0 and all(v is None for v in empty["e2e_ms"].values())
