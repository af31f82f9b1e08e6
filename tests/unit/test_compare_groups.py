"""The gate over groups of runs and their history: which runs stand for the run-to-run noise, and a
group's rates where nothing went wrong (:mod:`loadtest.compare.reference`, :mod:`loadtest.compare.groups`)."""

from __future__ import annotations

import contextlib
import io
import json

from support.gate_runs import T0, cli, write_run


def test_a_groups_rate_with_no_failure_in_any_run_is_unchanged_as_the_pairs_is(tmp_path):
    """Two baselines and one candidate, no request failed in any: each run's Wilson interval at 0 failures
    of a few dozen requests was joined into "+0.0 pp [-14.0 pp, +14.0 pp]", inconclusive at a 1 pp
    tolerance (exit 6 on a healthy server), where the pair of the same runs says unchanged. Now the
    groups say what the pair says; a group in which a request did fail keeps its interval."""
    with contextlib.redirect_stdout(io.StringIO()):
        runs = [write_run(tmp_path / f"r{i}", seed=40 + i, t0=T0 + i * 86_400, duration=3.0, levels=(1, 2))
                for i in range(3)]
        failing = write_run(tmp_path / "failing", seed=50, t0=T0 + 5 * 86_400, duration=3.0, levels=(1, 2), fail_every=7)
    _, out, _ = cli("compare", str(runs[0]), str(runs[2]), "--also-baseline", str(runs[1]), "--json", str(tmp_path / "g.json"))
    rates = [c for c in json.loads((tmp_path / "g.json").read_text())["checks"] if c["check"] == "error_rate"]
    assert len(rates) == 2, out
    for c in rates:
        assert c["verdict"] == "unchanged" and not c["holds_gate"], c["message"]
        assert "no request failed in either run, so no interval" in c["message"], c["message"]
    _, out, _ = cli("compare", str(runs[0]), str(failing), "--also-baseline", str(runs[1]), "--json", str(tmp_path / "f.json"))
    rates = [c for c in json.loads((tmp_path / "f.json").read_text())["checks"] if c["check"] == "error_rate"]
    assert rates and all(c["ci"][0] < c["change"] < c["ci"][1] and "no interval" not in c["message"] for c in rates), out


def test_a_history_run_its_own_gate_rejected_is_not_noise(tmp_path):
    """A trial of the nightly CronJob: night 3 (a much slower server) was rightly rejected and stayed in
    the results; counted among the reference runs it widened the noise to ±1000% and more, so night 4,
    13-27% slower, passed and was promoted. A run whose compare.json says ``regression`` is left out
    of the reference runs now, with a warning, and the slower night fails as it does against a clean
    history."""
    with contextlib.redirect_stdout(io.StringIO()):
        for i, scale in enumerate([1.0, 1.03, 0.98, 1.02]):
            write_run(tmp_path / "results" / f"night-{i}", seed=200 + i, t0=T0 + i * 86_400, scale=scale)
        slow = write_run(tmp_path / "results" / "night-4", seed=204, t0=T0 + 4 * 86_400, scale=3.0)
        base = tmp_path / "results" / "night-3"
        mid = write_run(tmp_path / "results" / "night-5", seed=205, t0=T0 + 5 * 86_400, scale=1.25)
    args = ("compare", str(base), str(mid), "--history", str(tmp_path / "results"), "--json", str(tmp_path / "c.json"))
    code_poisoned, out, _ = cli(*args)
    assert code_poisoned == 0, out  # the slow night counted as noise: the 25% slowdown passes (the trial's bug)
    run = json.loads((slow / "run.json").read_text())
    # a compare.json that judged another run says nothing of this one (a manual compare written here)
    other = {"name": run["name"], "started_wall": run["started_wall"] + 1.0}
    (slow / "compare.json").write_text(json.dumps({"outcome": "regression", "candidate": other}))
    assert cli(*args)[0] == 0
    mine = {"name": run["name"], "started_wall": run["started_wall"]}  # as the gate writes its candidate
    (slow / "compare.json").write_text(json.dumps({"outcome": "regression", "exit_code": 1, "candidate": mine}))
    code, out, _ = cli(*args)
    assert code == 1, out
    warnings = json.loads((tmp_path / "c.json").read_text())["warnings"]
    assert any("1 run(s) of this workload that their own gate rejected" in w and str(slow) in w for w in warnings), warnings
    # with --repeat the verdict is in the folder holding the runs, naming them among its candidates
    (slow / "compare.json").unlink()
    group = tmp_path / "results" / "night-4-group"
    group.mkdir()
    slow.rename(group / "run-01")
    (group / "compare.json").write_text(json.dumps({"outcome": "regression", "candidates": [str(group / "run-01")]}))
    assert cli(*args)[0] == 1


def test_the_markdown_names_the_candidate_group_not_its_first_run(tmp_path):
    """Trial E: the Markdown of `run --repeat 2` read "candidate `…/run-01`" (only a warning said 2 candidate
    runs). It names the group: "candidates `run-01, run-02 of …/nightly`"; one run reads as before."""
    with contextlib.redirect_stdout(io.StringIO()):
        base = write_run(tmp_path / "base", seed=60, t0=T0, duration=3.0, levels=(1, 2))
        runs = [write_run(tmp_path / "nightly" / f"run-{i:02d}", seed=61 + i, t0=T0 + (1 + i) * 86_400, duration=3.0,
                          levels=(1, 2)) for i in (1, 2)]
    md, page = tmp_path / "c.md", tmp_path / "c.html"
    cli("compare", str(base), str(runs[0]), "--also-candidate", str(runs[1]), "--markdown", str(md), "--html", str(page))
    group = f"run-01, run-02 of {tmp_path / 'nightly'}"
    assert f"candidates `{group}` (" in md.read_text() and f"Baseline `{base}` (" in md.read_text(), md.read_text()
    # compare.html's facts too (they named run-01 alone)
    assert f"<tr><th>candidate</th><td>{group}: capacity" in page.read_text()
    cli("compare", str(base), str(runs[0]), "--markdown", str(md))
    assert f"candidate `{runs[0]}` (" in md.read_text(), md.read_text()
