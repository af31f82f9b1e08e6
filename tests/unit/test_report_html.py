"""report.html is one offline file that names the capacity; the terminal table prints."""

from __future__ import annotations

import io

from rich.console import Console

from loadtest.analysis import SloSpec, analyze, analyze_run
from support.synthetic import level_plan, run_dict, to_frame, write_sample_run
from loadtest.report import print_summary, write_reports


def test_report_html_is_self_contained_and_names_the_capacity(tmp_path):
    run_dir = write_sample_run(tmp_path)
    analysis = analyze_run(run_dir)
    path = write_reports(run_dir, analysis)["html"]
    html = path.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert "<script src=\"http" not in html and "<script src='http" not in html
    assert "cdn.plot.ly" not in html.split("</head>")[1]
    assert "Plotly.newPlot" in html and "plotly.js" in html  # library inlined, figures drawn with it
    assert "Capacity: 4 concurrent users" in html
    assert analysis.capacity.message.split(";")[0] in html
    assert "ttft_ms.p95" in html and "mock-model" in html
    assert path.stat().st_size < 8_000_000


def test_report_html_without_data_does_not_crash(tmp_path):
    analysis = analyze(to_frame([]), run_dict(level_plan([1, 2], 10.0)), SloSpec.from_dict({"itl_ms": {"p95": 5}}))
    html = write_reports(tmp_path, analysis)["html"].read_text()
    assert "Capacity: unknown" in html


def test_terminal_summary_states_the_capacity(tmp_path):
    analysis = analyze_run(write_sample_run(tmp_path))
    console = Console(file=io.StringIO(), width=140, record=True, color_system=None)
    print_summary(analysis, console)
    text = console.export_text()
    assert "This endpoint holds 4 concurrent users" in text
    for header in ("users", "TTFT p95", "ITL p95", "TPOT p95", "tok/s", "good/s", "verdict"):
        assert header in text
    assert "fail" in text and "pass" in text


def test_refine_probes_get_unlabelled_ticks_and_crowded_labels_are_thinned():
    from types import SimpleNamespace

    from loadtest.report.plotting import concurrency_axis as _concurrency_axis, thin_log_ticks

    levels = [SimpleNamespace(concurrency=c, load=c, rate_rps=None, refine=False) for c in (1, 2, 4, 8, 16, 32, 64)]
    levels += [SimpleNamespace(concurrency=c, load=c, rate_rps=None, refine=True) for c in (20, 22, 23, 24)]
    axis = _concurrency_axis(levels)
    assert axis["type"] == "log"
    assert axis["tickvals"] == [1, 2, 4, 8, 16, 32, 64]  # only the swept levels carry a label
    assert axis["minor"]["tickvals"] == [20, 22, 23, 24]  # the probes: a tick, their value in the hover
    # a linear sweep on a log axis: labels too close at the top are dropped, the last one kept
    kept = thin_log_ticks(list(range(10, 201, 10)), 1.3)
    assert kept[0] == 10 and kept[-1] == 200 and len(kept) < 20
    assert all(b / a >= 10 ** (0.07 * 1.3) - 1e-9 for a, b in zip(kept, kept[1:]))
    # refine halving below a first level that failed (16 → 8, 4, 2, then 3): the probes below are labelled
    below = [SimpleNamespace(concurrency=16, load=16, rate_rps=None, refine=False)]
    below += [SimpleNamespace(concurrency=c, load=c, rate_rps=None, refine=True) for c in (8, 4, 2, 3)]
    axis = _concurrency_axis(below)
    assert axis["tickvals"] == [2, 4, 8, 16] and axis["minor"]["tickvals"] == [3], axis


def test_terminal_shows_no_figures_for_a_level_without_a_measured_request():
    """A run stopped just after a level began: that level's only records are the requests the stop
    cut (they had their first token) while the previous level's last requests ended in its window.
    The table printed their TTFT and the previous level's goodput beside "no data"."""
    from support.synthetic import closed_loop_rows, request_row

    levels = level_plan([1, 2], 10.0)
    rows = closed_loop_rows(0, 1, levels[0]["start_wall"], 10.0, ttft_ms=35.0, itl_ms=10.0)
    for user in range(2):  # level 2: both users cut 0.3 s in, after their first chunk
        rows.append(request_row(request_id=f"cut-{user}", level=2, level_index=1, user=user,
                                start_wall=levels[1]["start_wall"] + 0.01, chunk_ms=[35.0, 45.0], e2e_ms=300.0,
                                ok=False, error_kind="cancelled", error="stopped"))
    analysis = analyze(to_frame(rows), run_dict(levels), SloSpec.from_dict({"ttft_ms": {"p95": 500}}))
    cut = analysis.levels[1]
    assert cut.status == "no_data" and cut.ttft_ms.n == 2  # the samples are kept (summary.json has them)
    console = Console(file=io.StringIO(), width=160, record=True, color_system=None)
    print_summary(analysis, console)
    row = next(line for line in console.export_text().splitlines() if line.strip().startswith("2 ") and "no data" in line)
    assert "35" not in row and row.count("–") >= 5, row


def test_tables_printed_to_a_pipe_are_not_cut_to_80_columns(monkeypatch):
    """`loadtest profile | tee` (a CI log) cut the decode table's cells: "memory_o…", "sequenc…"."""
    from rich.table import Table

    from loadtest.report.terminal import PIPE_WIDTH, stdout_console

    monkeypatch.setattr("sys.stdout", io.StringIO())  # not a terminal
    console = stdout_console()
    assert console.width == PIPE_WIDTH == 120
    table = Table(*["sequences", "ITL p50 ms", "ITL p95 ms", "fitted ms", "tokens/s", "bound", "efficiency"])
    table.add_row("64", "42.00", "42.41", "42.00", "1529", "memory_or_overhead", "—")
    with console.capture() as captured:
        console.print(table)
    assert "memory_or_overhead" in captured.get() and "sequences" in captured.get()


def test_an_open_loop_report_names_its_levels_as_rates_not_users():
    """The box plots' axis, the timeline's step line and the figure titles read "concurrent users"
    over an open loop's rates."""
    from loadtest.report.figures import distribution_figure, latency_figure, timeline_figure
    from support.synthetic import closed_loop_rows

    plan = level_plan([1, 2], 20.0)
    rows = []
    for lv, rate in zip(plan, (2.0, 4.0)):
        lv["rate_rps"] = rate
        rows += closed_loop_rows(lv["index"], lv["concurrency"], lv["start_wall"], 20.0, ttft_ms=50.0, itl_ms=10.0, chunks=8)
    analysis = analyze(to_frame(rows), run_dict(plan), SloSpec.from_dict({"ttft_ms": {"p95": 500}}))
    assert [lv.rate_rps for lv in analysis.levels] == [2.0, 4.0]
    box = distribution_figure(analysis)
    assert box.layout.xaxis.title.text == "offered rate (requests/s)"
    assert latency_figure(analysis).layout.title.text == "Latency against offered rate"
    timeline = timeline_figure(analysis)
    assert timeline.data[0].name == "offered rate (requests/s)" and timeline.layout.yaxis2.title.text == "offered rate (requests/s)"
    closed = analyze(to_frame(closed_loop_rows(0, 1, plan[0]["start_wall"], 20.0, ttft_ms=50.0, itl_ms=10.0, chunks=8)),
                     run_dict(level_plan([1], 20.0)), SloSpec.from_dict({"ttft_ms": {"p95": 500}}))
    assert distribution_figure(closed).layout.xaxis.title.text == "concurrent users"
