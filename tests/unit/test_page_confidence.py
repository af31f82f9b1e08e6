"""The history and compare pages name their intervals at the confidence the runs were judged at.

A run whose levels are looked at twice is judged at 1 − 5%/2 = 97.5% (docs/gate.md), and its
summary.json's intervals are 97.5% intervals; the pages said "95% CI" over them whatever the
confidence. Real run folders (records, run.json, an analysis by ``loadtest analyze``), real pages.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from loadtest.cli import main
from support.synthetic import closed_loop_rows, level_plan, write_run_folder

T0 = 1_764_000_000.0
SLO = {"ttft_ms": {"p95": 10_000}, "itl_ms": {"p95": 10_000}, "max_error_rate": 0.5}


def _run(folder: Path, *, seed: int, t0: float, confidence: float | None) -> Path:
    """A run folder as ``loadtest run`` leaves it; with ``confidence``, one whose levels were judged at it."""
    scenario = {
        "name": "nightly",
        "target": {"base_url": "http://127.0.0.1:8000/v1", "model": "mock-model", "api": "chat"},
        "workload": {"prompt_tokens": {"mean": 64, "stddev": 0}, "max_tokens": 16, "seed": 0},
        "load": {"levels": [1, 2], "level_duration_s": 6, "warmup_s": 1, "warmup_requests": 0},
        "slo": SLO,
    }
    plan = level_plan([1, 2], 6.0, t0=t0)
    rows = []
    for lv in plan:
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], 6.0, ttft_ms=40.0 * c, itl_ms=10.0 * c, chunks=16,
                                 warmup_s=1.0, seed=seed + 7 * lv["index"], jitter=0.03)
    write_run_folder(folder, rows, plan, scenario)
    if confidence is not None:  # as a run with looks records it (run.json verdict_confidence), analyzed again
        run = json.loads((folder / "run.json").read_text())
        run["verdict_confidence"] = confidence
        (folder / "run.json").write_text(json.dumps(run))
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["analyze", str(folder)]) == 0
    assert json.loads((folder / "summary.json").read_text())["confidence"] == (confidence or 0.95)
    return folder


def _cli(*args: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(list(args))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    looked = [_run(root / "looked" / f"n{i}", seed=i, t0=T0 + i * 86_400, confidence=0.975) for i in (1, 2)]
    once = _run(root / "once" / "n3", seed=3, t0=T0 + 3 * 86_400, confidence=None)
    return root, looked, once


def test_the_history_page_names_the_confidence_of_its_bars(runs, tmp_path):
    root, looked, once = runs
    page = tmp_path / "history.html"
    assert _cli("history", str(root / "looked"), "--html", str(page)) == 0
    html = page.read_text()
    assert "bars: 97.5% CI" in html and "95% CI" not in html.replace("97.5% CI", "")
    # runs judged at different confidences: the page says both, never one for all
    assert _cli("history", str(root), "--html", str(page)) == 0
    assert "bars: 95% CI or 97.5% CI" in page.read_text()


def test_the_compare_page_names_the_confidence_of_its_bands(runs, tmp_path):
    _, (base, cand), _ = runs
    page = tmp_path / "compare.html"
    assert _cli("compare", str(base), str(cand), "--html", str(page)) in (0, 1, 6)
    html = page.read_text()
    assert "bands: each run's 97.5% CI" in html and "97.5% bootstrap intervals" in html
    assert "95% CI" not in html.replace("97.5% CI", "")
