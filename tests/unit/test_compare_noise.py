"""Run-to-run noise in the gate: the hierarchical bootstrap's coverage, and the gate with a history of runs.

The synthetic runs (tests/support/gate_runs.py's ``write_run``) have latencies that
grow with concurrency times ``scale``; a drifting server is a history whose
runs' scales are drawn from a spread, as a real staging server moves from run
to run.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil

import numpy as np
import pytest

from loadtest.compare import joint, noise
from support.gate_runs import T0, cli, held_change, write_run

DRIFT = [1.0, 1.07, 0.95, 1.04, 0.97, 1.09, 1.02]  # a server that moves by about ±5% from run to run


def _gate_alarms(rng, n, checks, rho, shift, trials=200):
    """Share of trials in which some check of a candidate is beyond the joint noise thresholds:
    reference runs and the candidate from one population whose checks share a run effect (correlation
    ``rho``), the candidate ``shift`` (in run-to-run SDs) worse on every check."""
    alarms = 0
    for t in range(trials):
        common = rng.standard_normal((n + 1, 1))
        x = math.sqrt(rho) * common + math.sqrt(1 - rho) * rng.standard_normal((n + 1, checks))
        x[n] += shift
        family = [joint.CheckNoise([noise.RunPoint(float(x[i, k]), 0.0, f"r{i}") for i in range(n)], [float(x[n, k])])
                  for k in range(checks)]
        thresholds = joint.calibrate(family, np.random.default_rng(t), resamples=1000)
        alarms += any(thresholds.beyond(i, c.z) for i, c in enumerate(family))
    return alarms / trials


@pytest.mark.parametrize("rho", [0.0, 0.9])
def test_the_joint_thresholds_hold_the_false_alarms_over_all_checks(rho):
    """12 checks, 8 reference runs, nothing changed: some check beyond the noise in about 5% of the
    trials, whether the checks move together (a drifting server) or not at all. 200 trials: the
    binomial SD is 1.5 points, the bound 3 SDs above the target."""
    rate = _gate_alarms(np.random.default_rng(7), 8, 12, rho, 0.0)
    assert rate <= 0.095, rate


def test_a_shift_of_every_check_is_seen_together_though_each_alone_is_within_its_noise():
    """Every check 3 run-to-run SDs worse (a 15% slowdown on a server drifting 5%): Bonferroni over the
    12 checks would need each beyond about 3.6; judged together they are caught most of the time
    (measured 81 of 100 trials; the bound is 4 binomial SDs below)."""
    from scipy.stats import t as student_t

    shift = 3.0
    assert shift < student_t.ppf(1 - 0.05 / 12, 7)
    assert _gate_alarms(np.random.default_rng(8), 8, 12, 0.8, shift * math.sqrt(1 + 1 / 8), trials=100) >= 0.65


def test_run_points_read_a_summary_level():
    summary = {"confidence": 0.95, "levels": [{"concurrency": 2, "status": "pass", "itl_ms": {"p95": 20.0, "ci": {"p95": [18.0, 22.0]}},
                                               "output_tokens_per_s": 50.0, "error_rate": 0.01, "error_rate_ci": [0.0, 0.03]}]}
    p = noise.run_point(summary, "itl_ms.p95", "latency", 2, 0.95)
    assert p.value == pytest.approx(math.log(20.0)) and p.se == pytest.approx((math.log(22) - math.log(18)) / (2 * 1.959964), rel=1e-4)
    assert noise.run_point(summary, "output_tokens_per_s", "throughput", 2, 0.95).se == 0.0
    assert noise.run_point(summary, "error_rate", "error_rate", 2, 0.95).value == 0.01
    assert noise.run_point(summary, "itl_ms.p95", "latency", 4, 0.95) is None


@pytest.fixture(scope="module")
def drifting(tmp_path_factory):
    """A history of runs of one server that drifts by a few percent per run, a baseline, and candidates."""
    root = tmp_path_factory.mktemp("drift")
    with contextlib.redirect_stdout(io.StringIO()):
        for i, scale in enumerate(DRIFT):
            write_run(root / "history" / f"run-{i}", seed=100 + i, t0=T0 + i * 86_400, scale=scale)
        base = write_run(root / "base", seed=1, t0=T0 + 10 * 86_400, scale=1.0)
        same = write_run(root / "same", seed=2, t0=T0 + 11 * 86_400, scale=1.08)  # drift, not a regression
        slow = write_run(root / "slow", seed=3, t0=T0 + 12 * 86_400, scale=1.35)
    return root, base, same, slow


def test_without_history_a_change_past_the_tolerance_is_inconclusive_and_says_what_is_needed(drifting, tmp_path):
    root, base, same, slow = drifting
    code, out, _ = cli("compare", str(base), str(same), "--json", str(tmp_path / "c.json"))
    assert code == 6, out
    report = json.loads((tmp_path / "c.json").read_text())
    held = [c for c in report["checks"] if c["holds_gate"]]
    unknown = [c for c in held if "run-to-run noise unknown" in c["message"]]
    assert unknown and all("3 needed" in c["message"] and c["noise"] == "unknown" for c in unknown)
    # each of them was within-run certain: only the unknown run-to-run noise holds it
    assert all(c["within_ci"][0] > c["tolerance"] for c in unknown if c["kind"] == "latency")
    assert "--history" in report["headline"] and report["history_runs"] == 1
    # without run-to-run noise, only the SLO's own percentiles are judged (no medians)
    assert not [c for c in report["checks"] if c["name"].startswith(("itl_ms.p50", "ttft_ms.p50"))]
    # So does a slowdown far past the tolerance (+35%): a real server drifts that far (a vLLM's
    # throughput +22%, a llama-server's TTFT p50 -37% between two runs); with the history it fails.
    code, out, _ = cli("compare", str(base), str(slow), "--json", str(tmp_path / "s.json"))
    assert code == 6 and json.loads((tmp_path / "s.json").read_text())["counts"]["regression"] == 0, out
    assert cli("compare", str(base), str(slow), "--history", str(root / "history"))[0] == 1


def test_a_history_of_too_few_runs_adds_no_medians(drifting, tmp_path):
    """--history that holds one earlier run (what `history` gives the second run of a series): the
    run-to-run noise is still unknown, so the medians stay out, as without --history. They came in
    whenever --history was given, and a median's narrow within-run interval turned a same-server
    run's drift into a regression (seen: ttft_ms.p50 +20.1%, exit 1)."""
    root, base, same, slow = drifting
    one = tmp_path / "one"
    shutil.copytree(root / "history" / "run-0", one / "run-0")
    code, out, _ = cli("compare", str(base), str(same), "--history", str(one), "--json", str(tmp_path / "c.json"))
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["history_runs"] == 2  # the baseline and run-0: fewer than the 3 needed
    assert not [c for c in report["checks"] if c["name"].startswith(("itl_ms.p50", "ttft_ms.p50"))]
    assert code in (0, 6), out  # never a regression for a drift of 8%
    # with enough reference runs they join (the test below judges them)
    code, _, _ = cli("compare", str(base), str(same), "--history", str(root / "history"), "--json", str(tmp_path / "h.json"))
    assert [c for c in json.loads((tmp_path / "h.json").read_text())["checks"] if c["name"].startswith("itl_ms.p50")]


def test_with_history_drift_passes_and_a_real_slowdown_fails(drifting, tmp_path):
    root, base, same, slow = drifting
    code, out, _ = cli("compare", str(base), str(same), "--history", str(root / "history"), "--json", str(tmp_path / "c.json"))
    assert code == 0, out
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["history_runs"] == 1 + len(DRIFT)
    itl = next(c for c in report["checks"] if c["name"] == "itl_ms.p95 @ 4 users")
    assert itl["noise"] == "history" and itl["noise_runs"] == 1 + len(DRIFT)
    # with a history, each SLO metric's median is judged too, against the same run-to-run noise
    median = next(c for c in report["checks"] if c["name"] == "itl_ms.p50 @ 4 users")
    assert median["noise"] == "history" and median["verdict"] != "regression"
    # side by side: the within-run interval is narrower than the run-to-run noise on this server
    w, n = itl["within_ci"], itl["noise_ci"]
    assert (n[1] - n[0]) > (w[1] - w[0]) and "run-to-run noise" in itl["message"]
    md = tmp_path / "c.md"
    code, out, _ = cli("compare", str(base), str(slow), "--history", str(root / "history"), "--json", str(tmp_path / "s.json"),
                       "--markdown", str(md), "--html", str(tmp_path / "c.html"))
    # the report shows both kinds of noise side by side
    assert "| within-run | run-to-run noise |" in md.read_text() and "8 reference run(s)" in md.read_text()
    assert "<th>within-run interval</th><th>run-to-run noise</th>" in (tmp_path / "c.html").read_text()
    assert code == 1, out
    slow_checks = {c["name"]: c for c in json.loads((tmp_path / "s.json").read_text())["checks"]}
    slow_itl = slow_checks["itl_ms.p95 @ 4 users"]
    assert slow_itl["verdict"] == "regression" and slow_itl["ci"][0] > 0.05
    assert slow_checks["itl_ms.p50 @ 4 users"]["verdict"] == "regression"  # the median saw it too


def test_several_candidates_are_gated_as_a_group_and_a_foreign_one_is_refused(drifting, tmp_path):
    root, base, same, slow = drifting
    code, out, _ = cli("compare", str(base), str(same), "--also-candidate", str(root / "history" / "run-6"),
                       "--also-baseline", str(root / "history" / "run-5"), "--history", str(root / "history"),
                       "--json", str(tmp_path / "g.json"))
    report = json.loads((tmp_path / "g.json").read_text())
    assert code == 0, out
    assert len(report["candidates"]) == 2 and len(report["baselines"]) == 2
    other = write_run(tmp_path / "other", seed=9, max_tokens=32)
    code, _, err = cli("compare", str(base), str(same), "--also-candidate", str(other))
    assert code == 2 and "max_tokens" in err and len(err.strip().splitlines()) == 1
    assert f"--also-candidate {other}" in err  # named by the argument that gave it, not "candidate"


def test_a_groups_throughput_has_no_within_run_interval_rather_than_a_point(drifting, tmp_path):
    """Two runs a side: a summary keeps no throughput interval (each run's se is 0), and the groups'
    change read "+13.5% [+13.5%, +13.5%]", a certainty nothing measured. It has no interval now; a
    latency percentile's interval, from each run's own, is still there."""
    root, base, same, _ = drifting
    code, out, _ = cli("compare", str(base), str(same), "--also-candidate", str(root / "history" / "run-6"),
                       "--json", str(tmp_path / "g.json"))
    checks = json.loads((tmp_path / "g.json").read_text())["checks"]
    throughput = [c for c in checks if c["check"] == "output_tokens_per_s"]
    assert throughput and all(c["ci"] is None or all(x is None for x in c["ci"]) for c in throughput), throughput
    latency = [c for c in checks if c["kind"] == "latency" and c["ci"] and all(x is not None for x in c["ci"])]
    assert latency and all(c["ci"][0] < c["ci"][1] for c in latency)
    # without an interval it is still judged on its change, as before: a faster group's throughput is an
    # improvement (not inconclusive, which held the gate at exit 6), with two baselines and no history
    with contextlib.redirect_stdout(io.StringIO()):
        fast = write_run(tmp_path / "fast", seed=4, t0=T0 + 13 * 86_400, scale=0.7)
    code, out, _ = cli("compare", str(base), str(fast), "--also-baseline", str(root / "history" / "run-5"),
                       "--json", str(tmp_path / "f.json"))
    faster = [c for c in json.loads((tmp_path / "f.json").read_text())["checks"] if c["check"] == "output_tokens_per_s"]
    assert faster and all(c["verdict"] == "improvement" and not c["holds_gate"] for c in faster), \
        [(c["verdict"], c["message"]) for c in faster]


def test_a_check_better_than_the_reference_runs_is_said_better_not_negatively_worse(drifting, tmp_path):
    """A real llama-server nightly read "improvement itl_ms.p50 at 1 users … -13.7% worse than the mean
    of the 3 reference runs (z -4.5, alone -4.5)"."""
    root, base, _, _ = drifting
    with contextlib.redirect_stdout(io.StringIO()):
        fast = write_run(tmp_path / "fast", seed=4, t0=T0 + 13 * 86_400, scale=0.7)
    code, out, _ = cli("compare", str(base), str(fast), "--history", str(root / "history"), "--json", str(tmp_path / "f.json"))
    better = [c for c in json.loads((tmp_path / "f.json").read_text())["checks"] if c["verdict"] == "improvement"
              and "reference runs (z" in c["message"]]
    assert better, out
    assert all("better than the mean of the" in c["message"] and "% worse than" not in c["message"] for c in better)


def test_gate_argument_mistakes_name_their_argument(drifting, tmp_path):
    """An empty --fail-on (a CI variable left unset) gated on everything; --history named itself "DIR"."""
    _, base, same, _ = drifting
    for extra, says in [(["--fail-on", ""], "--fail-on '': name what fails the gate"),
                        (["--tolerance", " "], "--tolerance ' ': expected a tolerance"),
                        (["--history", str(tmp_path / "nowhere")], f"--history {tmp_path / 'nowhere'}: no such folder"),
                        (["--also-baseline", str(tmp_path / "nowhere")], f"--also-baseline {tmp_path / 'nowhere'}")]:
        code, _, err = cli("compare", str(base), str(same), *extra)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (extra, err)


# -- stationarity inside a level ------------------------------------------------------------------


def write_drifting_run(folder, *, second_half=1.0, seed=0, t0=T0):
    """Like write_run (levels 1, 2, 4; 10 s each), but at 4 users the second half of the level is
    ``second_half`` times slower (a server still warming up, a neighbour arriving)."""
    from support.synthetic import closed_loop_rows, level_plan
    from support.gate_runs import scenario_dict, write_folder

    sc = scenario_dict()
    plan = level_plan(sc["load"]["levels"], 10.0, t0=t0)
    rows = []
    for lv in plan:
        c, start = lv["concurrency"], lv["start_wall"]
        halves = [(start, 5.0, 1.0), (start + 5.0, 5.0, second_half)] if c == 4 else [(start, 10.0, 1.0)]
        for h, (s0, dur, k) in enumerate(halves):
            part = closed_loop_rows(lv["index"], c, s0, dur, ttft_ms=40.0 * c * k, itl_ms=10.0 * c * k, chunks=16,
                                    warmup_s=1.0 if h == 0 else 0.0, seed=seed + 7 * lv["index"] + h, jitter=0.03)
            for r in part:
                r["request_id"] += f"-h{h}"
            rows += part
    with contextlib.redirect_stdout(io.StringIO()):
        return write_folder(folder, rows, plan, sc)


def test_a_level_that_drifts_inside_the_run_is_inconclusive_not_compared(tmp_path):
    base = write_drifting_run(tmp_path / "base", seed=1)
    steady = write_drifting_run(tmp_path / "steady", seed=2, t0=T0 + 86_400)
    drifting = write_drifting_run(tmp_path / "drift", seed=3, t0=T0 + 2 * 86_400, second_half=1.4)
    code, out, _ = cli("compare", str(base), str(steady), "--json", str(tmp_path / "s.json"))
    assert "drifted" not in out
    code, out, _ = cli("compare", str(base), str(drifting), "--json", str(tmp_path / "d.json"))
    report = json.loads((tmp_path / "d.json").read_text())
    at4 = [c for c in report["checks"] if c["level"] == 4]
    assert at4 and all(c["verdict"] == "inconclusive" and "drifted within the run" in c["message"] for c in at4)
    assert any("first half" in w and "4 users" in w for w in report["warnings"])
    assert all("drifted" not in c["message"] for c in report["checks"] if c["level"] in (1, 2))
    assert code == 6, out  # held, not failed: the level measured two servers


def test_a_change_past_the_tolerance_inside_the_noise_is_not_called_within_tolerance(drifting, tmp_path):
    """A run 8% slower on a server that drifts by about ±5%: within the run-to-run noise, so not a
    regression, but not "within tolerance" (5%) either. A llama-server trial's gate said "25 checks
    within tolerance or better" over a +35% TTFT that only wide noise (5 reference runs) let pass."""
    root, base, same, _ = drifting
    code, out, _ = cli("compare", str(base), str(same), "--history", str(root / "history"), "--json", str(tmp_path / "c.json"))
    assert code == 0, out
    report = json.loads((tmp_path / "c.json").read_text())
    noise_only = [c for c in report["checks"] if c["within_noise_only"]]
    assert noise_only, [(c["name"], c["verdict"], c["message"]) for c in report["checks"]]
    for c in report["checks"]:
        assert c["within_noise_only"] == ("beyond the tolerance but within the run-to-run noise" in c["message"]
                                          and c["verdict"] == "unchanged"), c
    headline = out.splitlines()[0]
    assert f"{len(noise_only)} worse by more than the tolerance but within the run-to-run noise" in headline, headline
    assert "within tolerance or better" not in headline
    within = sum(1 for c in report["checks"] if c["verdict"] == "unchanged") - len(noise_only)
    assert f"{within} of {len(report['checks'])} checks within tolerance" in headline
    # the terminal lists them with their numbers, as "within noise" (not "unchanged": a trial's +57%), and counts them apart
    assert any(line.strip().startswith("within noise") for line in out.splitlines())
    assert not any(line.strip().startswith("unchanged") for line in out.splitlines())
    assert f"; {len(noise_only)} within the run-to-run noise only" in out
    # and so does the Markdown (a real llama-server's compare.md counted them "unchanged" and listed none)
    code, _, _ = cli("compare", str(base), str(same), "--history", str(root / "history"), "--markdown", str(tmp_path / "c.md"))
    md = (tmp_path / "c.md").read_text()
    assert f"{len(noise_only)} past the tolerance but within the run-to-run noise" in md
    assert all(f"| {c['name']} |" in md for c in noise_only[:10]), md


def test_a_baseline_level_that_drifted_is_judged_among_the_reference_runs_not_held(tmp_path):
    """With a history, the baseline is one reference run of many: a level that drifted in it is in their
    mean and spread. A trial's baseline drifted at one level, and that level stayed 'not compared' in
    every later comparison, whatever the history. The candidate's own drift still holds its level."""
    for i in range(4):
        write_drifting_run(tmp_path / "history" / f"run-{i}", seed=10 + i, t0=T0 + i * 86_400)
    base = write_drifting_run(tmp_path / "base", seed=1, t0=T0 + 5 * 86_400, second_half=1.4)
    steady = write_drifting_run(tmp_path / "steady", seed=2, t0=T0 + 6 * 86_400)
    code, out, _ = cli("compare", str(base), str(steady), "--history", str(tmp_path / "history"), "--json", str(tmp_path / "s.json"))
    report = json.loads((tmp_path / "s.json").read_text())
    at4 = [c for c in report["checks"] if c["level"] == 4]
    assert at4 and all(c["noise"] == "history" and "not compared" not in c["message"] for c in at4), at4
    assert any("4 users drifted" in w and "one of the 5 reference runs" in w for w in report["warnings"]), report["warnings"]
    assert code == 0, out
    # without the history, the baseline's drift still holds the level
    code, out, _ = cli("compare", str(base), str(steady), "--json", str(tmp_path / "n.json"))
    at4 = [c for c in json.loads((tmp_path / "n.json").read_text())["checks"] if c["level"] == 4]
    assert all(c["verdict"] == "inconclusive" and "drifted within the run" in c["message"] for c in at4)
    # and a candidate that drifts is held, history or not
    drifted = write_drifting_run(tmp_path / "drift", seed=3, t0=T0 + 7 * 86_400, second_half=1.4)
    code, out, _ = cli("compare", str(base), str(drifted), "--history", str(tmp_path / "history"), "--json", str(tmp_path / "d.json"))
    at4 = [c for c in json.loads((tmp_path / "d.json").read_text())["checks"] if c["level"] == 4]
    assert all(c["verdict"] == "inconclusive" and "drifted within the run" in c["message"] for c in at4)


def test_a_copy_of_the_baseline_in_the_history_counts_once(drifting, tmp_path):
    """A nightly's baseline is a night committed from the runs the history also keeps: the same run in
    two folders. Counted twice, it would weigh double in the reference mean and narrow the spread."""
    root, base, same, _ = drifting
    history = tmp_path / "history"
    shutil.copytree(root / "history", history)
    shutil.copytree(base, history / "the-baseline-night")
    cli("compare", str(base), str(same), "--history", str(history), "--json", str(tmp_path / "c.json"))
    assert json.loads((tmp_path / "c.json").read_text())["history_runs"] == 1 + len(DRIFT)


def test_a_history_that_gives_no_run_of_this_workload_is_said(drifting, tmp_path):
    """An empty --history folder, or one of another workload's runs, contributed nothing: a trial's gate
    said only "1 reference run(s)", with no word that the folder it was given was no use."""
    root, base, same, _ = drifting
    (tmp_path / "empty").mkdir()
    code, out, _ = cli("compare", str(base), str(same), "--history", str(tmp_path / "empty"), "--json", str(tmp_path / "c.json"))
    warnings = json.loads((tmp_path / "c.json").read_text())["warnings"]
    assert any(w.startswith("--history: its 0 run folder(s) add no earlier complete run") for w in warnings), warnings
    # a history that gives runs says nothing of the kind
    cli("compare", str(base), str(same), "--history", str(root / "history"), "--json", str(tmp_path / "h.json"))
    assert not any(w.startswith("--history:") for w in json.loads((tmp_path / "h.json").read_text())["warnings"])


@pytest.mark.parametrize(("candidate", "alone", "verdict", "noise_only"), [
    (math.log(1.03), 5.0, "unchanged", False),  # beyond the noise, 3% worse: within the 5% tolerance
    (math.log(1.08), 0.5, "unchanged", True),   # within the noise, 8% worse: past the tolerance
    (math.log(1.08), 5.0, "regression", False),
    (math.log(1.02), 0.5, "unchanged", False),  # within both
])
def test_within_the_noise_only_is_said_of_a_change_past_the_tolerance_and_of_nothing_else(candidate, alone, verdict, noise_only):
    """Both unchanged-with-words branches of the verdict exist: only the one whose change is past the
    tolerance, inside the noise, is ``within_noise_only`` (the other is beyond the noise, within tolerance)."""
    from loadtest.compare.groups import _beyond_noise, _Check

    reference = [noise.RunPoint(v, 0.0, f"r{i}") for i, v in enumerate([0.0, 0.01, -0.01, 0.005, -0.005])]
    check = _Check(change=None, noise=joint.CheckNoise(reference, [candidate]), d=candidate, within=(0.0, 0.0), slot=0)
    thresholds = joint.JointNoise(checks=1, runs=5, max_critical=2.0, marginal_critical=2.0, composite_critical=2.0,
                                  composite=0.0, false_alarms=0.05, alone=(alone,))
    got, _, words, within_noise_only = _beyond_noise(check, thresholds, 0.05, relative=True)
    assert (got, within_noise_only) == (verdict, noise_only), words


def test_the_hint_counts_the_runs_that_measured_the_held_level():
    """A level that only 2 of 5 reference runs measured is judged without the run-to-run noise; the
    headline said "unknown with 5 reference run(s): give 1 more", which no run of 5 explains."""
    def held(level, runs):
        return held_change("itl_ms.p95", "latency", level, 1.0, noise_runs=runs, noise="unknown")

    hint = noise.history_hint([held(8, 2)], 5, 3, True)
    assert "only 2 of the 5 reference runs measured the level" in hint and "at least 1 more" in hint, hint
    hint = noise.history_hint([held(8, 1)], 1, 3, True)
    assert hint.startswith("run-to-run noise is unknown with 1 reference run(s)") and "at least 2 more" in hint, hint


def test_a_drift_of_a_millisecond_step_is_printed_with_the_digits_that_show_it():
    """A real llama-server's TPOT of about 1 ms read "1.0 ms in its first half, 1.0 ms in its second
    (+6.7%)": the rounding hid the drift the line reported."""
    from loadtest.compare.stationarity import Drift

    text = Drift(4, "tpot_ms", 1.0, 1.067, 4e-5).text()
    assert "1.00 ms in its first half, 1.07 ms in its second (+6.7%" in text
    assert "20.1 ms in its first half, 27.9 ms in its second" in Drift(4, "tpot_ms", 20.1, 27.9, 1e-4).text()


def test_a_check_fail_on_leaves_out_is_judged_alone_with_a_finite_band(drifting, tmp_path):
    """``--fail-on itl_ms.p95``: the TTFT and throughput checks are outside the family judged together. Their
    band was ±∞ ("run-to-run noise [÷∞, +7.7%]" beside a +36% change); each is now judged alone from its
    own reference runs (Student's t at both sides of 5%), shown, and fails nothing."""
    root, base, same, slow = drifting
    code, out, _ = cli("compare", str(base), str(slow), "--history", str(root / "history"), "--fail-on", "itl_ms.p95",
                       "--json", str(tmp_path / "s.json"))
    assert code == 1, out  # the ITL p95 checks fail the gate
    checks = {c["name"]: c for c in json.loads((tmp_path / "s.json").read_text())["checks"]}
    ttft = checks["ttft_ms.p95 @ 4 users"]
    assert not ttft["gating"] and ttft["noise"] == "history"
    lo, hi = ttft["noise_ci"]
    assert -0.5 < lo < 0 < hi < 0.5, ttft["noise_ci"]
    assert "∞" not in ttft["message"] and ttft["verdict"] == "regression"  # +36%: beyond its own noise too
    assert all("∞" not in c["message"] for c in checks.values()), [c["message"] for c in checks.values()]
    critical = joint.alone_critical(8)
    assert 2.3 < critical < 2.4  # t(0.975, 7 degrees of freedom) = 2.365


def test_the_noise_line_says_when_there_is_no_composite():
    quiet = joint.JointNoise(checks=3, runs=4, max_critical=3.1, marginal_critical=2.0, composite_critical=math.nan,
                             composite=math.nan, false_alarms=0.05)
    line = quiet.describe()
    assert "no composite (the reference runs never moved together)" in line and "nan" not in line, line
    moved = joint.JointNoise(checks=3, runs=4, max_critical=3.1, marginal_critical=2.0, composite_critical=2.5,
                             composite=0.4, false_alarms=0.05)
    assert "composite +0.4 (beyond ±2.5 means the run as a whole moved)" in moved.describe()
