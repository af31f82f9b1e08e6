"""The terminal's per-level table shows the value of every percentile an SLO judges.

A trial ran ``analyze RUN --slo e2e_ms.p99=400``: e2e was the binding SLO, and the table had
no e2e column, so the figure that decided each verdict was nowhere on the screen. The records
here are synthetic (tests/support/synthetic.py), analyzed by the real pipeline.
"""

from __future__ import annotations

from rich.console import Console

from loadtest.analysis import SloSpec, analyze
from loadtest.analysis.capacity import fmt_ms
from loadtest.report.sections import levels_table
from loadtest.report.terminal import build_table, latency_columns
from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame


def _analysis(slo: dict):
    plan = level_plan([1, 2], 8.0)
    rows = []
    for lv in plan:
        rows += closed_loop_rows(lv["index"], lv["concurrency"], lv["start_wall"], 8.0,
                                 ttft_ms=60.0 * lv["concurrency"], itl_ms=15.0, jitter=0.2, seed=lv["index"])
    return analyze(to_frame(rows), run_dict(plan, slo=slo), SloSpec.from_dict(slo), resamples=200)


def _cells(table) -> dict[str, list[str]]:
    return {str(col.header): [str(c) for c in col._cells] for col in table.columns}


def test_a_metric_only_an_slo_judges_gets_its_column_at_the_judged_percentile():
    analysis = _analysis({"ttft_ms": {"p95": 1000}, "e2e_ms": {"p99": 400}, "max_error_rate": 0.01})
    cells = _cells(build_table(analysis))
    assert "e2e p99" in cells, list(cells)
    assert cells["e2e p99"] == [fmt_ms(lv.metric("e2e_ms").percentile("p99")) for lv in analysis.levels]
    # the usual columns stay, in their place; the judged one comes after them
    latency = [h for h in cells if h.split()[-1].startswith("p")]
    assert latency == ["TTFT p95", "ITL p95", "TPOT p95", "e2e p99"], latency
    Console(width=200, record=True).print(build_table(analysis))  # it renders


def test_each_percentile_judged_on_one_metric_has_its_column():
    analysis = _analysis({"itl_ms": {"p50": 30, "p99": 80}, "ttfb_ms": {"p90": 500}})
    assert latency_columns(analysis) == [
        ("ttft_ms", "p95"), ("itl_ms", "p50"), ("itl_ms", "p99"), ("tpot_ms", "p95"), ("ttfb_ms", "p90")]
    cells = _cells(build_table(analysis))
    assert cells["ITL p99"] == [fmt_ms(lv.metric("itl_ms").percentile("p99")) for lv in analysis.levels]
    assert cells["TTFB p90"] == [fmt_ms(lv.metric("ttfb_ms").percentile("p90")) for lv in analysis.levels]


def test_without_an_slo_on_them_the_columns_are_the_registrys_at_p95():
    assert latency_columns(_analysis({"max_error_rate": 0.01})) == [
        ("ttft_ms", "p95"), ("itl_ms", "p95"), ("tpot_ms", "p95")]


def test_the_reports_levels_table_has_a_column_for_every_percentile_an_slo_judges_too():
    """report.html's table had the registry's columns only: ``e2e_ms.p99`` and ``ttfb_ms.p90`` judged
    every level, and their values were in the checks table alone."""
    analysis = _analysis({"ttft_ms": {"p95": 1000}, "e2e_ms": {"p99": 400}, "ttfb_ms": {"p90": 500}})
    html = levels_table(analysis)
    head = html.split("</tr>", 1)[0]
    assert "<th>e2e p99</th>" in head and "<th>TTFB p90</th>" in head, head
    assert head.count("<th>TTFT p95</th>") == 1  # judged and in the registry's columns: once
    last_row = html.split("</table>", 1)[0].split("</tr>")[-2]  # the last level's
    assert f">{fmt_ms(analysis.levels[-1].metric('e2e_ms').percentile('p99'))}</td>" in last_row, last_row
    plain = levels_table(_analysis({"max_error_rate": 0.01})).split("</tr>", 1)[0]
    assert "e2e p99" not in plain and "TTFB" not in plain
