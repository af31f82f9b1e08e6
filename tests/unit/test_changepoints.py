"""Change points over a history (Apache Otava): a step at a known run is flagged there, noise is not."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from loadtest.compare.changepoints import find_shifts, gate_failures, mark_newest, series_change_points
from support.gate_runs import T0, cli, write_run


def noisy(n: int, seed: int, sd: float = 0.03) -> list[float]:
    return list(100.0 * np.exp(np.random.default_rng(seed).normal(0.0, sd, n)))


def test_a_step_at_a_known_run_is_flagged_at_that_run_with_its_size():
    values = [v * (1.15 if i >= 12 else 1.0) for i, v in enumerate(noisy(20, seed=3))]
    where = [(f"run-{i}", f"day {i}") for i in range(20)]
    points = series_change_points("itl_ms.p95", 4, values, where, higher_is_worse=True)
    assert [cp.index for cp in points] == [12]
    cp = points[0]
    assert cp.run == "run-12" and cp.worse and cp.change == pytest.approx(0.15, abs=0.04) and cp.pvalue < 0.001
    # the same step in throughput is a worsening when it goes down
    down = series_change_points("output_tokens_per_s", 4, [200 - v for v in values], where, higher_is_worse=False)
    assert [cp.index for cp in down] == [12] and down[0].worse


def test_noise_only_flags_nothing_and_rarely_anything_over_many_series():
    assert find_shifts(noisy(20, seed=11)) == []
    flagged = sum(bool(find_shifts(noisy(20, seed=s))) for s in range(100))
    assert flagged <= 6  # Otava at p = 0.001 per split: a few percent of pure-noise series


def test_missing_points_are_skipped_and_indices_stay_the_runs():
    values: list[float | None] = [v * (1.3 if i >= 8 else 1.0) for i, v in enumerate(noisy(14, seed=5))]
    values[3] = None
    assert [i for i, *_ in find_shifts(values)] == [8]


def test_the_gate_fails_only_on_a_recent_worsening_shift_beyond_the_tolerance():
    where = [(f"r{i}", "") for i in range(14)]
    late = series_change_points("itl_ms.p95", 1, [v * (1.2 if i >= 12 else 1) for i, v in enumerate(noisy(14, 2))],
                                where, higher_is_worse=True)
    early = series_change_points("itl_ms.p95", 2, [v * (1.2 if i >= 4 else 1) for i, v in enumerate(noisy(14, 2))],
                                 where, higher_is_worse=True)
    better = series_change_points("itl_ms.p95", 4, [v * (0.8 if i >= 12 else 1) for i, v in enumerate(noisy(14, 2))],
                                  where, higher_is_worse=True)
    points = mark_newest(late + early + better, 14)
    failing = gate_failures(points, lambda check: 0.05)
    assert [(cp.level, cp.index) for cp in failing] == [(1, 12)]
    assert gate_failures(points, lambda check: 0.5) == []  # a 20% shift within a 50% tolerance


@pytest.fixture(scope="module")
def step_history(tmp_path_factory):
    """Eight nightly runs; from the sixth on the server is 30% slower."""
    root = tmp_path_factory.mktemp("steps")
    scales = [1.0, 1.02, 0.99, 1.01, 0.98, 1.3, 1.31, 1.29]
    with contextlib.redirect_stdout(io.StringIO()):
        for i, scale in enumerate(scales):
            write_run(root / f"night-{i}", seed=200 + i, t0=T0 + i * 86_400, scale=scale)
    return root


def test_history_marks_the_change_point_and_the_gate_fails_on_it(step_history, tmp_path):
    page, doc = tmp_path / "h.html", tmp_path / "h.json"
    code, out, _ = cli("history", str(step_history), "--html", str(page), "--json", str(doc), "--fail-on-change-point")
    assert code == 1, out
    shifts = json.loads(doc.read_text())["change_points"]
    itl = [cp for cp in shifts if cp["check"] == "itl_ms.p95"]
    assert itl and {cp["run"] for cp in itl} == {"night-5"} and all(cp["worse"] and cp["newest"] for cp in itl)
    assert all(cp["change"] == pytest.approx(0.3, abs=0.06) for cp in itl)
    assert "CHANGE POINT" in out and "night-5" in out
    html = page.read_text()
    assert "Change points" in html and "night-5" in html and "diamond-open" in html
    # without the flag the history only reports it
    assert cli("history", str(step_history), "--html", str(page))[0] == 0


def test_a_history_of_noise_only_flags_no_change_point(tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        for i, scale in enumerate([1.0, 1.02, 0.99, 1.01, 0.98, 1.0, 1.02]):
            write_run(tmp_path / "runs" / f"night-{i}", seed=300 + i, t0=T0 + i * 86_400, scale=scale)
    doc = tmp_path / "h.json"
    code, out, _ = cli("history", str(tmp_path / "runs"), "--html", str(tmp_path / "h.html"), "--json", str(doc),
                       "--fail-on-change-point")
    assert code == 0, out
    assert json.loads(doc.read_text())["change_points"] == []
