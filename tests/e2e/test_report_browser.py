"""A real run's report.html, opened in a real headless Chromium with the network switched off.

Checks what only a browser can: the page runs without a console error or an
uncaught exception, every plot drew its traces (SVG paths per trace), the
verdict is visible at the top, the concurrency axis's tick labels do not print
on top of each other (the refine probes sit close together on a log axis), it
needs nothing from the network, and it prints (the print CSS applies).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.browser import INSTALL_HINT, PLOTS_JS, Chromium, find_chromium
from loadtest.analysis import analyze_run
from loadtest.mock.process import MockServer
from loadtest.report.html import plain_verdict
from support.runkit import copy_as_another_run, loadtest, write_scenario

CHROMIUM = find_chromium()
#: asserts nothing about time (how the report renders; its SLO limits (60 s) no starved host misses): runs in make test's parallel pass
pytestmark = [pytest.mark.untimed, pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason=f"Chromium not found; {INSTALL_HINT}")]


@pytest.fixture(scope="module")
def refined_run(tmp_path_factory) -> Path:
    """A real run whose levels crowd the log axis between 16 and 32 users, as refine probes do.

    The crowded levels are given, not left to --refine to find: where a bisection
    lands depends on timings, and the test must see a crowded axis every time.
    Every level holds the loose SLOs, so the sweep runs them all: a level that failed would stop it
    (test_concurrency_tick_labels_do_not_overlap needs 20-24) and name a "p95" in the headline. At the
    idle class beside the timing tests a 3 s level can go without a core for a second or more, so the
    limits (and the request timeout) are 60 s, which no starved host reaches, not 5 s / 1 s.
    """
    folder = tmp_path_factory.mktemp("browser")
    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "2", "--prefill-per-token-ms", "0"]) as mock:
        scenario = write_scenario(
            folder, mock.base_url, target={"timeout_s": 60},
            load={"levels": [4, 8, 16, 20, 22, 23, 24, 32], "level_duration_s": 3, "warmup_s": 0.5,
                  "min_level_duration_s": 3, "max_level_duration_s": 3},
            slo={"ttft_ms": {"p95": 60000}, "itl_ms": {"p95": 60000}, "max_error_rate": 0.05},
        )
        result = loadtest("run", str(scenario), "--out", str(folder / "run"), timeout=300)
    assert result.returncode == 0, result.stderr
    return folder / "run"


@pytest.fixture(scope="module")
def browser():
    with Chromium(CHROMIUM, width=1280, height=1000) as chromium:
        yield chromium


@pytest.fixture(scope="module")
def opened(refined_run, browser):
    return browser.open(refined_run / "report.html")


def test_the_report_runs_offline_without_a_console_error(opened, browser, refined_run):
    assert opened.console_errors == []
    assert opened.exceptions == []
    assert opened.outside_requests == []  # everything it needs is in the one file
    assert opened.failed_loads == []
    assert browser.evaluate("typeof Plotly") == "object"
    assert browser.evaluate("navigator.onLine") is False  # the page really was offline


def test_every_plot_drew_its_traces(opened, browser, refined_run):
    plots = browser.evaluate(PLOTS_JS)
    assert len(plots) >= 5, plots  # latency, throughput, knee, distributions, timeline (+ server view)
    for plot in plots:
        assert plot["height"] > 100, plot
        assert plot["with_data"] > 0, plot
        # every trace with data has an SVG group with at least one drawn path
        assert plot["traces_with_paths"] >= plot["with_data"], plot
        assert plot["drawn_paths"] >= plot["with_data"], plot


def test_the_verdict_is_visible_in_plain_words_before_any_number(opened, browser, refined_run):
    analysis = analyze_run(refined_run)
    shown = browser.evaluate("""(function () {
      var h = document.getElementById('headline'), cap = document.querySelector('.cap');
      var r = h.getBoundingClientRect(), c = cap.getBoundingClientRect(), s = getComputedStyle(h);
      return {text: h.innerText, top: r.top, height: r.height, visible: s.visibility === 'visible' && s.display !== 'none',
              cap_top: c.top, cap_text: cap.innerText, viewport: window.innerHeight,
              before: document.body.innerText.split(h.innerText)[0]};
    })()""")
    assert shown["text"] == plain_verdict(analysis)
    assert shown["visible"] and shown["height"] > 0 and 0 <= shown["top"] < shown["viewport"]
    assert shown["top"] < shown["cap_top"] < shown["viewport"]
    assert shown["cap_text"].startswith("Capacity:")
    assert not any(ch.isdigit() for ch in shown["text"])  # plain words, the numbers follow
    assert shown["before"].strip() == "test: capacity report"  # only the title comes before it


def test_concurrency_tick_labels_do_not_overlap(opened, browser, refined_run):
    levels = sorted({lv.concurrency for lv in analyze_run(refined_run).levels})
    assert {20, 22, 23, 24} <= set(levels)  # there to crowd the axis
    overlaps = browser.evaluate("""(function () {
      var out = [];
      document.querySelectorAll('.js-plotly-plot').forEach(function (plot, i) {
        var groups = {};
        plot.querySelectorAll('g.xtick text, g[class^="x"][class$="tick"] text').forEach(function (t) {
          var key = t.parentNode.getAttribute('class');
          (groups[key] = groups[key] || []).push(t.getBoundingClientRect());
        });
        Object.keys(groups).forEach(function (key) {
          var boxes = groups[key].filter(function (b) { return b.width > 0; }).sort(function (a, b) { return a.left - b.left; });
          for (var j = 1; j < boxes.length; j++) {
            if (boxes[j].left < boxes[j - 1].right - 0.5 && boxes[j].top < boxes[j - 1].bottom && boxes[j - 1].top < boxes[j].bottom)
              out.push({plot: i, axis: key, left: boxes[j - 1].right, right: boxes[j].left});
          }
        });
      });
      return out;
    })()""")
    assert overlaps == []


def test_the_report_prints_cleanly(opened, browser, refined_run, tmp_path):
    browser.send("Emulation.setEmulatedMedia", media="print")
    try:
        hidden = browser.evaluate("""[
          getComputedStyle(document.querySelector('.modebar-container')).display,
          document.querySelector('.calc') ? getComputedStyle(document.querySelector('.calc')).display : 'none'
        ]""")
        assert hidden == ["none", "none"]  # no toolbars or input fields on paper
        pdf = browser.print_pdf(tmp_path / "report.pdf").read_bytes()
    finally:
        browser.send("Emulation.setEmulatedMedia", media="")
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page\n") + pdf.count(b"/Type /Page ") + pdf.count(b"/Type /Page/") >= 2


def test_the_report_stays_one_file_of_plotly_once(refined_run):
    page = (refined_run / "report.html").read_text(encoding="utf-8")
    assert page.count("Plotly.newPlot") >= 5
    assert page.count("plotly.js v") <= 2  # the bundle's banner: inlined once
    assert (refined_run / "report.html").stat().st_size < 7_000_000


def test_without_chromium_the_skip_says_how_to_install():
    assert "apt-get install" in INSTALL_HINT and "chromium" in INSTALL_HINT
    assert shutil.which("chromium") or CHROMIUM is None or CHROMIUM


@pytest.fixture(scope="module")
def gate_pages(refined_run, tmp_path_factory) -> dict[str, Path]:
    """The regression gate's pages for the same real run: a comparison with a copy of it taken for a
    later run (a plain copy is refused as the same run), and the history."""
    folder = tmp_path_factory.mktemp("gate-pages")
    run_copy = folder / "runs" / "second"
    copy_as_another_run(refined_run, run_copy)
    pages = {"compare": folder / "compare.html", "history": folder / "history.html"}
    compared = loadtest("compare", str(refined_run), str(run_copy), "--html", str(pages["compare"]),
                        "--inconclusive", "pass", timeout=300)
    assert compared.returncode in (0, 6), compared.stderr
    shutil.copytree(refined_run, folder / "runs" / "first")
    history = loadtest("history", str(folder / "runs"), "--html", str(pages["history"]), timeout=300)
    assert history.returncode == 0, history.stderr
    return pages


@pytest.mark.parametrize("page", ["compare", "history"])
def test_the_gate_pages_run_offline_and_draw_their_plots(gate_pages, browser, page):
    opened = browser.open(gate_pages[page])
    assert opened.console_errors == [] and opened.exceptions == []
    assert opened.outside_requests == [] and opened.failed_loads == []
    plots = browser.evaluate(PLOTS_JS)
    assert plots, f"{page}.html has no plot"
    for plot in plots:
        assert plot["with_data"] > 0 and plot["traces_with_paths"] >= plot["with_data"], plot
