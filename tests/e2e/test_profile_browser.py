"""The profile's report.html and a run report's "What limits it, and what it costs" section, in headless Chromium.

The same checks as the run report's (tests/e2e/test_report_browser.py): no console
error or uncaught exception, nothing from the network, every plot drew its
traces; and the new sections are there and visible.
"""

from __future__ import annotations

import json

import pytest

from support.browser import INSTALL_HINT, PLOTS_JS, Chromium, find_chromium
from loadtest.mock.process import MockServer
from support.runkit import loadtest, write_scenario

CHROMIUM = find_chromium()
#: asserts nothing about time (how the pages render, not the figures in them): runs in make test's parallel pass
pytestmark = [pytest.mark.untimed, pytest.mark.browser, pytest.mark.skipif(CHROMIUM is None, reason=f"Chromium not found; {INSTALL_HINT}")]

ROOFLINE = ["--roofline-hbm-gbps", "1000", "--roofline-tflops", "16", "--roofline-params-b", "8",
            "--roofline-kv-bytes-per-token", "4e6", "--roofline-overhead-ms", "0.5"]


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("profile-browser")
    with MockServer(ROOFLINE) as mock:
        scenario = write_scenario(folder, mock.base_url, target={"api": "completions", "timeout_s": 30},
                                  hardware={"hbm_gbps": 1000, "tflops": 16}, model={"kv_bytes_per_token": 4e6})
        result = loadtest("profile", str(scenario), "--out", str(folder / "profile"), "--max-prompt-tokens", "256",
                          "--prefill-s", "4", "--decode-level-s", "3", "--warmup", "1", "--max-batch", "4",
                          "--decode-max-tokens", "32", timeout=600)
        # The run report's section comes from an ordinary run of two levels far apart, not from re-analyzing
        # the profile's decode ladder: at the idle class beside the timing tests the ladder can stop at its
        # first level (its limit is twice one user's ITL p50), and one level is one batch size, so no decode
        # fit and nothing for the section to name (a clean-clone run failed so). At 1 and 4 users of half-second
        # requests (32 tokens of a ~16 ms step) the median batches stay apart unless the client loses its
        # core for most of the level: the fit has two points. Its SLOs (60 s) are limits no host misses, so
        # the run has a capacity and so a price. Only the ITL, which every
        # chunk samples: a TTFT p95 needs 20 requests, and a starved clean-clone run's 1-user level had 19
        # ("uncertain: too few samples"), so no level passed and there was no price.
        run_scenario = write_scenario(folder, mock.base_url, name="run", target={"api": "completions", "timeout_s": 30},
                                      workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 32},
                                      load={"levels": [1, 4], "level_duration_s": 4, "warmup_s": 1},
                                      slo={"ttft_ms": {}, "itl_ms": {"p95": 60000}},
                                      hardware={"hbm_gbps": 1000, "tflops": 16}, model={"kv_bytes_per_token": 4e6})
        run = loadtest("run", str(run_scenario), "--out", str(folder / "run"), "--usd-per-hour", "2",
                       "--peak-users", "10", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]
    return {"profile": folder / "profile" / "report.html", "run": folder / "run" / "report.html"}


@pytest.fixture(scope="module")
def browser():
    with Chromium(CHROMIUM, width=1280, height=1000) as chromium:
        yield chromium


@pytest.mark.parametrize("page", ["profile", "run"])
def test_the_pages_run_offline_and_draw_every_plot(pages, browser, page):
    opened = browser.open(pages[page])
    assert opened.console_errors == [] and opened.exceptions == []
    assert opened.outside_requests == [] and opened.failed_loads == []
    plots = browser.evaluate(PLOTS_JS)
    assert len(plots) >= (2 if page == "profile" else 5), plots
    for plot in plots:
        assert plot["height"] > 100, plot
        assert plot["with_data"] > 0, plot
        assert plot["traces_with_paths"] >= plot["with_data"], plot


def test_the_profile_section_is_visible_in_plain_words(pages, browser):
    browser.open(pages["profile"])
    text = browser.evaluate("document.querySelector('#profile').innerText")
    # every plain-words sentence of profile.json, whatever it says: at the idle class beside the timing tests,
    # 4 s of prefill once gave 10 requests and the sentence that its cost was too small to measure
    sentences = json.loads((pages["profile"].parent / "profile.json").read_text())["summary"]
    assert sentences and all(s in text for s in sentences), (sentences, text[:2000])
    assert "decode is" in text or "decode step" in text
    assert browser.evaluate("document.querySelector('#profile').getBoundingClientRect().height") > 200


def test_the_run_report_says_what_limits_it_and_what_it_costs(pages, browser):
    browser.open(pages["run"])
    text = browser.evaluate("document.querySelector('#why').innerText")
    assert "memory-bound" in text or "compute-bound" in text or "nearly free" in text or "no knee" in text
    assert "$ per million output tokens" in text and "Forecast" in text
    assert browser.evaluate("document.querySelector('#why').getBoundingClientRect().height") > 100
