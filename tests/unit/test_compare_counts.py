"""The gate's count test for a rate whose reference runs never went wrong (loadtest/compare/counts.py).

Against clean reference runs, the joint normal noise put 0 → 10% failures of a level within the
run-to-run noise. These check the exact test itself (its p, its edge, its false alarms at any true
rate) and the gate end to end on run folders: a candidate that starts failing one request in ten
fails the gate on its error rate, and a clean one passes.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import pytest
from scipy.stats import binom, hypergeom

from loadtest.analysis.bootstrap import wilson_interval
from loadtest.compare import counts, noise
from support.gate_runs import T0, cli, scenario_dict
from support.synthetic import closed_loop_rows, level_plan, write_run_folder

#: SLO limits no synthetic level misses, and failures that do not fail a level: only the error-rate
#: check can see the candidate's failures (not the capacity).
LENIENT = {"ttft_ms": {"p95": 10_000}, "itl_ms": {"p95": 10_000}, "max_error_rate": 0.5}


@pytest.mark.parametrize("bad, n, r", [(1, 100, 500), (3, 10, 50), (4, 100, 500), (10, 40, 40), (0, 5, 5)])
def test_the_p_is_the_hypergeometric_tail(bad, n, r):
    """All ``bad`` failures among the candidates' ``n`` of ``n + r`` requests: hypergeom's P(X = bad)."""
    expected = hypergeom(n + r, bad, n).pmf(bad) if bad else 1.0
    assert counts.CleanCount(bad, n, r).p == pytest.approx(expected, rel=1e-9)


def test_the_smallest_flagged_count_is_the_edge_of_the_test():
    c = counts.CleanCount(bad=0, trials=100, reference_trials=500)
    x = c.smallest_flagged(0.01 / 5)
    assert x is not None and counts.CleanCount(x, 100, 500).p <= 0.002 < counts.CleanCount(x - 1, 100, 500).p
    assert counts.CleanCount(0, 3, 1).smallest_flagged(1e-6) is None  # 3 requests can never be that sure


def test_a_blip_counts_once_and_a_steady_rate_is_still_seen():
    """8 users: one blip fails the 8 requests in flight; one request in ten failing is 40 of 400."""
    blip = counts.CleanCount(bad=8, trials=400, reference_trials=2000, burst=8)
    assert counts.CleanCount(8, 400, 2000).flagged(0.01)  # counted one by one: p 6e-7
    assert not blip.flagged(0.01) and blip.p == pytest.approx(400 / 2400)  # one burst of 50
    assert counts.CleanCount(bad=40, trials=400, reference_trials=2000, burst=8).flagged(0.01 / 10)
    assert counts.burst_size([{"concurrency": 8, "rate_rps": None}, None]) == 8
    assert counts.burst_size([{"concurrency": 0, "rate_rps": 4.0, "open_loop": {"mean_in_flight": 2.3}}]) == 3


@pytest.mark.parametrize("rate", [1e-4, 1e-3, 5e-3, 0.02, 0.1])
def test_the_false_alarms_stay_within_the_level_whatever_the_true_rate(rate):
    """Same server, true failure rate ``rate``: the chance that the reference runs are clean *and* the
    candidate's count is flagged, computed exactly, is at most the test's level."""
    n, r, alpha = 100, 500, 0.002
    edge = counts.CleanCount(0, n, r).smallest_flagged(alpha)
    alarms = binom(r, rate).pmf(0) * binom(n, rate).sf(edge - 1)
    assert alarms <= alpha


def test_a_candidate_rate_is_judged_by_its_spread_at_the_reference_rate():
    """Not by its own: 10 of 100 carries a ±6-point interval that would hide its own change."""
    z = noise.z_of(0.95)
    lo, hi = wilson_interval(0, 100, 0.95)
    assert noise.rate_se(0.0, 100, 0.95) == pytest.approx((hi - lo) / (2 * z))
    ref = [noise.RunPoint(0.0, noise.rate_se(0.0, 100, 0.95), f"r{i}", 100) for i in range(5)]
    cand = [noise.RunPoint(0.1, 0.03, "c", 100)]
    assert noise.candidate_ses(cand, ref, 0.95) == [pytest.approx(noise.rate_se(0.0, 100, 0.95))]
    latency = [noise.RunPoint(math.log(20), 0.05, "c")]
    assert noise.candidate_ses(latency, ref, 0.95) == [0.05]  # a latency keeps its own
    assert counts.clean_count(cand, ref, worse_high=True) == counts.CleanCount(10, 100, 500)
    # the share of valid answers is worse low: its bad requests are the invalid ones
    valid_ref = [noise.RunPoint(1.0, 0.01, f"r{i}", 100) for i in range(5)]
    assert counts.clean_count([noise.RunPoint(0.9, 0.03, "c", 100)], valid_ref, worse_high=False) == counts.CleanCount(10, 100, 500)
    dirty = [*ref[:-1], noise.RunPoint(0.01, 0.01, "r4", 100)]
    assert counts.clean_count(cand, dirty, worse_high=True) is None  # a reference run that failed once


def _run(folder: Path, *, fail_every: int, seed: int, t0: float) -> Path:
    sc = scenario_dict(slo=LENIENT)
    plan = level_plan(sc["load"]["levels"], 10.0, t0=t0)
    rows = []
    for lv in plan:
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], 10.0, ttft_ms=40.0 * c, itl_ms=10.0 * c, chunks=16,
                                 warmup_s=1.0, seed=seed + 7 * lv["index"], jitter=0.03, fail_every=fail_every)
    return write_run_folder(folder, rows, plan, sc)


@pytest.fixture(scope="module")
def clean_history(tmp_path_factory):
    root = tmp_path_factory.mktemp("counts")
    with contextlib.redirect_stdout(io.StringIO()):
        for i in range(5):
            _run(root / "history" / f"run-{i}", fail_every=0, seed=100 + i, t0=T0 + i * 86_400)
        base = _run(root / "base", fail_every=0, seed=1, t0=T0 + 10 * 86_400)
        clean = _run(root / "clean", fail_every=0, seed=2, t0=T0 + 11 * 86_400)
        failing = _run(root / "failing", fail_every=10, seed=3, t0=T0 + 12 * 86_400)
    return root, base, clean, failing


def test_a_server_that_starts_failing_one_request_in_ten_fails_the_gate(clean_history, tmp_path):
    root, base, _, failing = clean_history
    out_json = tmp_path / "c.json"
    code, out, _ = cli("compare", str(base), str(failing), "--history", str(root / "history"), "--json", str(out_json))
    assert code == 1, out
    checks = [c for c in json.loads(out_json.read_text())["checks"] if c["name"].startswith("error_rate")]
    flagged = {c["level"]: c for c in checks if c["verdict"] == "regression"}
    # At 1 user a request is its own burst: 5 of ~50 against ~280 clean requests is p 7e-5, and the
    # count test says so. At 2 and 4 users the same share is 2 and 1.5 bursts (a blip could fail every
    # user's request at once), too few for the count alone; there the joint noise, with the candidate's
    # spread taken at the reference rate, sees the whole run's failures move together.
    assert 1 in flagged, [c["message"] for c in checks]
    one = flagged[1]
    assert one["noise"] == "history" and "against none of the reference runs'" in one["message"], one["message"]
    assert "counted in bursts of 1)" in one["message"]
    # the band the page shows ends where the count test turns, below the candidate's 10%
    assert one["noise_ci"][1] < one["candidate"], one
    for c in checks:
        # and a band's better end stops where the share would be 0 (it read -29 points below a rate of 0)
        assert c["noise_ci"][0] == 0.0 - c["baseline"], c
    # nothing else moved: the failures are the only regression
    assert all(c["name"].startswith("error_rate") for c in json.loads(out_json.read_text())["checks"]
               if c["verdict"] == "regression")


def test_a_clean_candidate_against_clean_runs_passes(clean_history, tmp_path):
    root, base, clean, _ = clean_history
    code, out, _ = cli("compare", str(base), str(clean), "--history", str(root / "history"))
    assert code == 0, out
