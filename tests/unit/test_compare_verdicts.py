"""The gate's verdicts on synthetic run folders (known answers, no load), and how every output says them.

The runs are support/gate_runs.py's: the same server, a 20% slower one, one that fails a request
in five, levels flagged untrustworthy (a saturated load generator, a busy host, a quiet client near
its timing error), an interrupted run, a warm-up run. Each test runs ``loadtest compare`` (or
``history``) and checks the verdict and its exit code (pass, regression, inconclusive), what held
it, and that the terminal, JUnit, JSON, Markdown and HTML say the same: a right verdict whose
reasons are missing from the page a CI job shows leaves whoever reads a red night to guess.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from support import gate_runs
from support.gate_runs import T0, cli, history_of, scenario_dict, write_folder, write_run
from support.synthetic import closed_loop_rows, level_plan


#: The module-scoped pair of runs (support/gate_runs.py), bound here so that pytest finds it as this file's fixture.
pair = gate_runs.pair


def test_same_server_passes_and_a_slower_one_fails_with_its_numbers(pair, tmp_path):
    _, base, same, slow = pair
    code, out, _ = cli("compare", str(base), str(same))
    assert code == 0, out
    assert cli("compare", str(base), str(same), *history_of(pair))[0] == 0
    junit = tmp_path / "gate.xml"
    code, out, _ = cli("compare", str(base), str(slow), "--junit", str(junit), "--json", str(tmp_path / "c.json"),
                       "--markdown", str(tmp_path / "c.md"), "--html", str(tmp_path / "c.html"), *history_of(pair))
    assert code == 1, out
    root = ET.parse(junit).getroot()
    failing = {c.get("name"): c.find("failure").get("message") for c in root.iter("testcase") if c.find("failure") is not None}
    assert "itl_ms.p95 @ 4 users" in failing and "ttft_ms.p95 @ 4 users" in failing
    # The message carries the numbers: both values, the change and its interval, which holds the truth (+20%).
    found = re.search(r"([\d.]+) ms → ([\d.]+) ms, \+([\d.]+)% \[\+([\d.]+)%, \+([\d.]+)%\]", failing["itl_ms.p95 @ 4 users"])
    assert found, failing["itl_ms.p95 @ 4 users"]
    before, after, change, lo, hi = map(float, found.groups())
    assert after / before - 1 == pytest.approx(change / 100, abs=0.001) and lo <= 20.0 <= hi
    # capacity + 3 levels × (ttft p95, itl p95, throughput, errors, and with the history the SLO metrics' medians)
    assert int(root.get("failures")) == len(failing) and int(root.get("tests")) == 1 + 3 * 6
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["outcome"] == "regression" and report["counts"]["regression"] >= 6
    regressed = {c["name"] for c in report["checks"] if c["verdict"] == "regression"}
    assert "output_tokens_per_s @ 2 users" in regressed  # throughput down is worse
    md = (tmp_path / "c.md").read_text()
    assert md.count("\n") < 40 and "🔴" in md
    page = (tmp_path / "c.html").read_text()
    assert "Plotly" in page and "regression" in page and "<script src=" not in page


def test_without_the_run_to_run_noise_a_large_slowdown_is_inconclusive_not_a_regression(pair, tmp_path):
    """One baseline run says nothing of how far the same server moves from run to run, and a real
    one moves more than a within-run interval shows (the suite's llama-server: ITL p95 at 4 users
    7.4 → 22.0 ms between two runs of an unchanged server, which this gate called a regression).
    So +20% everywhere, certain within the run, is inconclusive: exit 6, with what would decide it."""
    _, base, _, slow = pair
    code, out, _ = cli("compare", str(base), str(slow), "--json", str(tmp_path / "c.json"))
    assert code == 6, out
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["counts"]["regression"] == 0 and report["history_runs"] == 1
    itl4 = next(c for c in report["checks"] if c["name"] == "itl_ms.p95 @ 4 users")
    assert itl4["within_ci"][0] > 2 * itl4["tolerance"]  # far past the tolerance, and certain within the run
    assert itl4["verdict"] == "inconclusive" and itl4["noise"] == "unknown" and itl4["holds_gate"]
    assert "run-to-run noise unknown" in itl4["message"] and "add --history with 2 more" in itl4["message"]
    assert "--history with at least 2 more run(s)" in report["headline"], report["headline"]
    # a CI job that wants the old strictness says so
    assert cli("compare", str(base), str(slow), "--inconclusive", "fail")[0] == 1


def test_without_the_run_to_run_noise_a_server_that_fails_a_request_in_five_still_fails_the_gate(pair, tmp_path):
    """A failed request is not a speed that drifts: an error rate worse than twice its tolerance,
    certain within the run, is a regression without a history, and so is a percentile that the
    failures made infinite (a fifth of the requests failed: the TTFT p95 is a failure's)."""
    _, base, _, _ = pair
    with contextlib.redirect_stdout(io.StringIO()):
        failing = write_run(tmp_path / "failing", seed=4, t0=T0 + 3 * 86_400, fail_every=5)
    code, out, _ = cli("compare", str(base), str(failing), "--json", str(tmp_path / "c.json"))
    assert code == 1, out
    report = json.loads((tmp_path / "c.json").read_text())
    regressed = [c for c in report["checks"] if c["verdict"] == "regression" and c["level"] is not None]
    assert {c["check"] for c in regressed} >= {"error_rate"}, out
    for c in regressed:  # a rate, or a percentile the failures made infinite; no finite speed change
        assert c["check"] == "error_rate" or c["candidate"] is None or math.isinf(c["candidate"]), c["message"]


def test_fail_on_and_per_metric_tolerance_choose_what_fails(pair):
    _, base, _, slow = pair
    history = history_of(pair)
    assert cli("compare", str(base), str(slow), "--fail-on", "error_rate", *history)[0] == 0
    code, out, _ = cli("compare", str(base), str(slow), "--fail-on", "none", *history, "--json", str(pair[0] / "none.json"))
    assert code == 0
    # the regressions not gated are counted as such, not "within tolerance" (a trial read "4 of 13 checks
    # within tolerance" beside 3 unchanged and 1 regression)
    report = json.loads((pair[0] / "none.json").read_text())
    found = re.search(r"(\d+) of (\d+) checks within tolerance, (\d+) worse than the tolerance but not gated", report["headline"])
    assert found, report["headline"]
    within, n, worse = (int(x) for x in found.groups())
    noise_only = sum(1 for c in report["checks"] if c["within_noise_only"])
    assert worse == report["counts"]["regression"] > 0 and n == len(report["checks"]), report["counts"]
    assert within == report["counts"]["unchanged"] - noise_only, (report["headline"], report["counts"])
    assert cli("compare", str(base), str(slow), "--fail-on", "itl_ms.p95", *history)[0] == 1
    # A 40% tolerance on every metric absorbs a 20% slowdown.
    assert cli("compare", str(base), str(slow), "--tolerance", "40%", *history)[0] == 0
    # ... unless one metric is held tighter.
    assert cli("compare", str(base), str(slow), "--tolerance", "40%", "itl_ms.p95=5%", *history)[0] == 1


def test_noisy_short_runs_are_inconclusive_and_the_flag_maps_it(tmp_path):
    with contextlib.redirect_stdout(io.StringIO()):
        base = write_run(tmp_path / "a", seed=1, jitter=0.3, duration=2.5, levels=(1,))
        cand = write_run(tmp_path / "b", seed=2, jitter=0.3, duration=2.5, levels=(1,), t0=T0 + 100)
    code, out, _ = cli("compare", str(base), str(cand))
    assert code == 6, out
    assert "INCONCLUSIVE" in out
    # with only the baseline (1 of the 3 reference runs --min-history asks for), the headline says
    # how many runs are missing, as gate.md says; once said only for a change held for that alone
    headline = out.splitlines()[0]
    assert "--history with at least 2 more run(s)" in headline and "1 reference run(s), 3 needed" in headline, headline
    assert cli("compare", str(base), str(cand), "--inconclusive", "pass")[0] == 0
    junit = tmp_path / "j.xml"
    assert cli("compare", str(base), str(cand), "--inconclusive", "fail", "--junit", str(junit))[0] == 1
    assert ET.parse(junit).getroot().get("failures") != "0"


def test_a_certain_capacity_drop_fails_whatever_the_tolerance(tmp_path):
    slo = {"itl_ms": {"p95": 25}, "max_error_rate": 0.5}  # 10 ms per user: 2 users hold, 4 do not
    with contextlib.redirect_stdout(io.StringIO()):
        base = write_run(tmp_path / "a", seed=1, slo=slo)
        cand = write_run(tmp_path / "b", seed=2, slo=slo, itl_per_user=13.0, t0=T0 + 100)  # 2 users: 26 ms
    code, out, _ = cli("compare", str(base), str(cand), "--tolerance", "500%", "--json", str(tmp_path / "c.json"))
    assert code == 1, out
    cap = next(c for c in json.loads((tmp_path / "c.json").read_text())["checks"] if c["check"] == "capacity")
    assert cap["verdict"] == "regression" and cap["baseline"] == 2 and cap["candidate"] == 1


def test_a_candidate_that_fails_its_lowest_level_is_below_it_not_at_0_users(tmp_path):
    """A real llama-server slowed 100-fold failed its lowest level (1 user), and the gate said
    "capacity dropped for certain: 4 → 0 users (… the candidate certainly fails above 0)": 0 users
    were never tested. The words say below the lowest level; the numbers and the exit code stay."""
    slo = {"itl_ms": {"p95": 25}, "max_error_rate": 0.5}  # 10 ms per user: 2 users hold
    with contextlib.redirect_stdout(io.StringIO()):
        base = write_run(tmp_path / "a", seed=1, slo=slo)
        cand = write_run(tmp_path / "b", seed=2, slo=slo, itl_per_user=40.0, t0=T0 + 100)  # 1 user: 40 ms
    code, out, _ = cli("compare", str(base), str(cand), "--json", str(tmp_path / "c.json"),
                       "--html", str(tmp_path / "c.html"), "--markdown", str(tmp_path / "c.md"))
    assert code == 1, out
    report = json.loads((tmp_path / "c.json").read_text())
    cap = next(c for c in report["checks"] if c["check"] == "capacity")
    assert cap["verdict"] == "regression" and cap["baseline"] == 2 and cap["candidate"] == 0
    bounds = report["candidate"]["capacity"]["bounds"]
    assert bounds["upper"] == 0 and bounds["min_tested"] == 1 and bounds["lower"] == 0
    page, md = (tmp_path / "c.html").read_text(), (tmp_path / "c.md").read_text()
    for text in (out, cap["message"], report["headline"], page, md):
        assert "2 users → below 1 user, the lowest level tested" in text
        assert "fails at its lowest level" in text
        assert "→ 0 users" not in text and "fails above 0" not in text
    assert "capacity below 1 user, the lowest level tested" in page  # the facts table: not "capacity 0"


def test_warnings_for_a_different_slo_model_or_version_reach_every_output(pair, tmp_path):
    _, base, same, _ = pair
    cand = tmp_path / "cand"
    shutil.copytree(same, cand)
    run = json.loads((cand / "run.json").read_text())
    run["scenario"]["slo"] = {"ttft_ms": {"p95": 9_000}, "itl_ms": {"p95": 10_000}, "max_error_rate": 0.5}
    run["target"]["model"] = "other-model"
    run["tool_version"] = "9.9.9"
    (cand / "run.json").write_text(json.dumps(run))
    summary = json.loads((cand / "summary.json").read_text())
    summary["slo"] = run["scenario"]["slo"]
    (cand / "summary.json").write_text(json.dumps(summary))
    code, out, _ = cli("compare", str(base), str(cand), "--junit", str(tmp_path / "j.xml"),
                       "--markdown", str(tmp_path / "m.md"), "--json", str(tmp_path / "c.json"))
    assert code == 0, out
    for text in (out, (tmp_path / "j.xml").read_text(), (tmp_path / "m.md").read_text(),
                 (tmp_path / "c.json").read_text()):
        assert "SLO differs" in text and "model name differs" in text and "version differs" in text


def test_a_bare_summary_json_is_compared_from_its_intervals(pair, tmp_path):
    _, base, same, slow = pair
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(base / "summary.json", alone / "summary.json")
    code, out, _ = cli("compare", str(alone / "summary.json"), str(slow / "summary.json"), *history_of(pair))
    assert code == 1 and "no records" in out
    code, out, _ = cli("compare", str(alone / "summary.json"), str(same / "summary.json"))
    assert code in (0, 6) and "REGRESSION" not in out


def test_history_marks_the_run_that_regressed(pair, tmp_path):
    root, _, _, _ = pair
    page = tmp_path / "h.html"
    code, out, _ = cli("history", str(root), "--html", str(page), "--json", str(tmp_path / "h.json"))
    assert code == 0, out
    rows = json.loads((tmp_path / "h.json").read_text())["runs"]
    assert [Path(r["run"]).name for r in rows] == ["night-0", "night-1", "base", "same", "slow"]
    assert [r["vs_previous"] for r in rows] == ["first", "pass", "pass", "pass", "regression"]
    # a series of three: the slow run's 2 earlier runs do not make the noise known, so +20% is held
    short = tmp_path / "short"
    for run in ("base", "same", "slow"):
        shutil.copytree(root / run, short / run)
    code, _, _ = cli("history", str(short), "--json", str(tmp_path / "s.json"), "--html", str(tmp_path / "s.html"))
    assert code == 0
    assert [r["vs_previous"] for r in json.loads((tmp_path / "s.json").read_text())["runs"]] == ["first", "pass", "inconclusive"]
    assert "regressed" in page.read_text()
    with contextlib.redirect_stdout(io.StringIO()):
        write_run(tmp_path / "runs" / "x", name="other")
    code, _, err = cli("history", str(root), str(tmp_path / "runs"), "--html", str(page))
    assert code == 2 and "--scenario" in err
    assert cli("history", str(root), str(tmp_path / "runs"), "--scenario", "other", "--html", str(page))[0] == 0



def test_history_judges_a_night_after_a_rejected_one_against_the_last_passing_run(pair, tmp_path):
    """A nightly job promotes only a passing night, and leaves a rejected one out of the gate's history.
    ``history`` took the previous run as every run's reference and kept every run in the history: a
    second night as slow as the rejected one read "pass" against it, where the nightly said
    "regression" both nights. A night as fast as before passes again."""
    root = tmp_path / "nights"
    shutil.copytree(pair[0], root)
    with contextlib.redirect_stdout(io.StringIO()):
        write_run(root / "slow-again", seed=5, t0=T0 + 3 * 86_400, scale=1.2)
        write_run(root / "fixed", seed=6, t0=T0 + 4 * 86_400)
    code, out, _ = cli("history", str(root), "--json", str(tmp_path / "h.json"), "--html", str(tmp_path / "h.html"))
    assert code == 0, out
    rows = json.loads((tmp_path / "h.json").read_text())["runs"]
    assert [(Path(r["run"]).name, r["vs_previous"]) for r in rows][-3:] == [
        ("slow", "regression"), ("slow-again", "regression"), ("fixed", "pass")]


def test_the_terminal_says_once_why_the_noise_is_unknown(pair):
    """Without a history every held speed check ended with the same 100 characters on the unknown
    noise; the terminal says them once, under the list, and each line keeps "(below)"."""
    _, base, _, slow = pair
    code, out, _ = cli("compare", str(base), str(slow))
    assert code == 6, out
    held = [line for line in out.splitlines()[1:] if line.startswith("  HOLD")]
    assert len(held) >= 2 and all(line.endswith("; run-to-run noise unknown (below)") for line in held), out
    said = "  (below) run-to-run noise unknown: 1 reference run(s) of this workload, 3 needed: add --history with 2 more"
    assert out.splitlines().count(said) == 1 and out.count("add --history with 2 more") == 2, out  # and the headline


@pytest.mark.parametrize("history, min_history, few", [((), (), True), (("history",), (), False),
                                                       (("history",), ("--min-history", "4"), True)],
                         ids=["alone", "with-history", "history-below-min-history"])
def test_markdown_and_html_say_alike_whether_the_reference_runs_are_too_few(pair, tmp_path, history, min_history, few):
    """compare.md said "Run-to-run noise from 1 reference run(s)" without the page's "too few to know
    it: give --history", and the page counted against 3 whatever --min-history said."""
    _, base, _, slow = pair
    extra = [*(history_of(pair) if history else ()), *min_history]
    cli("compare", str(base), str(slow), "--markdown", str(tmp_path / "c.md"), "--html", str(tmp_path / "c.html"), *extra)
    runs = 3 if history else 1
    # the reference runs are the baseline and the history's (a trial's line read "3 reference run(s) (1
    # baseline(s), 1 candidate(s))", as if the candidate were one of them and 2 runs came from nowhere)
    said = f"{runs} reference run(s) of this workload (1 baseline(s) and {runs - 1} from --history; judged: 1 candidate(s)"
    said += "; too few to know it: give --history)" if few else ")"
    assert f"Run-to-run noise from {said}." in (tmp_path / "c.md").read_text()
    assert f"<th>run-to-run noise</th><td>{said}</td>" in (tmp_path / "c.html").read_text()


def test_a_slowdown_where_the_load_generator_was_saturated_is_only_inconclusive(pair, tmp_path):
    _, base, _, slow = pair
    cand = tmp_path / "cand"
    shutil.copytree(slow, cand)
    run = json.loads((cand / "run.json").read_text())
    for level in run["levels"]:
        level["client"]["saturated"] = True  # the self-check flagged every level of this run
    (cand / "run.json").write_text(json.dumps(run))
    # with the history, the slowdown is beyond the run-to-run noise: only the flag holds it
    code, out, _ = cli("compare", str(base), str(cand), "--json", str(tmp_path / "c.json"), *history_of(pair))
    assert code == 6, out
    checks = json.loads((tmp_path / "c.json").read_text())["checks"]
    itl4 = next(c for c in checks if c["name"] == "itl_ms.p95 @ 4 users")
    assert itl4["verdict"] == "inconclusive" and "saturated" in itl4["message"]


def _flag_near_limit(run: Path, level: int, stamp_ms: float, near: bool = True) -> None:
    """Flag ``level`` of ``run``'s summary as a quiet client's within-error verdict, its stamps late by ``stamp_ms``."""
    summary = json.loads((run / "summary.json").read_text())
    table = {"0.5": stamp_ms / 4, "0.75": stamp_ms / 2, "0.975": stamp_ms, "0.9975": stamp_ms, "max": 2 * stamp_ms}
    for lv in summary["levels"]:
        if lv["concurrency"] == level:
            lv.update(client_saturated=True, client_near_limit=near)
            lv["client"] = {**(lv.get("client") or {}), "stamp_delay_ms": table, "send_delay_ms": table,
                            "cpu_pct": 6.0, "saturated": True, "reason": "within error"}
    (run / "summary.json").write_text(json.dumps(summary))


@pytest.mark.parametrize("stamp_ms, near, verdict", [
    (1.0, True, "regression"),     # +8 ms at 4 users against at most 2 ms of the client's: the server's
    (10.0, True, "inconclusive"),  # the client's 20 ms could be all of it
    (1.0, False, "inconclusive"),  # a busy client (or a run before the flag): its delay has no bound
])
def test_a_quiet_clients_near_limit_level_still_shows_a_change_larger_than_its_timing_error(
        pair, tmp_path, stamp_ms, near, verdict):
    """Bare summaries (with records the comparison re-analyses them; the flag itself comes from the
    analysis, tests/unit/test_monitor.py)."""
    _, base, _, slow = pair
    (tmp_path / "base").mkdir()
    (tmp_path / "cand").mkdir()
    shutil.copy(base / "summary.json", tmp_path / "base" / "summary.json")
    shutil.copy(slow / "summary.json", tmp_path / "cand" / "summary.json")
    _flag_near_limit(tmp_path / "cand", 4, stamp_ms, near)
    code, out, _ = cli("compare", str(tmp_path / "base" / "summary.json"), str(tmp_path / "cand" / "summary.json"),
                       "--json", str(tmp_path / "c.json"), *history_of(pair))
    checks = json.loads((tmp_path / "c.json").read_text())["checks"]
    itl4 = next(c for c in checks if c["name"] == "itl_ms.p95 @ 4 users")
    assert itl4["verdict"] == verdict, itl4["message"]
    assert code == 1  # the other levels' +20% still fail the gate
    if verdict == "regression":
        assert "cannot explain this change" in itl4["message"] and "at most 2.0 ms" in itl4["message"]
        errors4 = next(c for c in checks if c["name"] == "error_rate @ 4 users")
        assert "quiet" in errors4["message"]
        warnings = json.loads((tmp_path / "c.json").read_text())["warnings"]
        assert any("quiet load generator's timing error" in w and "at 4 users" in w for w in warnings), warnings
    else:
        assert "saturated" in itl4["message"]


def test_a_slowdown_on_a_busy_host_is_only_inconclusive(pair, tmp_path):
    """host_contended (the host's other work, not the client, made a level untrustworthy) gates like saturation."""
    _, base, _, slow = pair
    cand = tmp_path / "cand"
    shutil.copytree(slow, cand)
    run = json.loads((cand / "run.json").read_text())
    for level in run["levels"]:  # untrustworthy, and the host was busy while the client idled
        level["client"].update(saturated=True, cpu_pct=3.0, host_cores=2, host_others_pct=95.0,
                               host_cpu_pressure_pct=40.0, client_run_delay_pct=30.0)
    (cand / "run.json").write_text(json.dumps(run))
    # with the history, the slowdown is beyond the run-to-run noise: only the flag holds it
    code, out, _ = cli("compare", str(base), str(cand), "--json", str(tmp_path / "c.json"), *history_of(pair))
    assert code == 6, out
    result = json.loads((tmp_path / "c.json").read_text())
    itl4 = next(c for c in result["checks"] if c["name"] == "itl_ms.p95 @ 4 users")
    assert itl4["verdict"] == "inconclusive" and "host" in itl4["message"] and "saturated" not in itl4["message"]
    assert any("busy with other work" in w for w in result["warnings"])


def test_a_busy_host_at_a_repeated_levels_smaller_entry_does_not_hold_back_the_compared_one(pair, tmp_path):
    """A concurrency that ran twice is compared at its larger entry; a host_contended flag on the other
    (a short first try) must not turn that entry's regression into an inconclusive one, as the
    client's flag already does not (both read levels_by_concurrency)."""
    _, base, _, slow = pair
    (tmp_path / "base").mkdir()
    (tmp_path / "cand").mkdir()
    shutil.copy(base / "summary.json", tmp_path / "base" / "summary.json")
    cand = json.loads((slow / "summary.json").read_text())
    at4 = next(lv for lv in cand["levels"] if lv["concurrency"] == 4)
    short = {**at4, "requests": max(1, (at4.get("requests") or 2) // 10), "host_contended": True}
    cand["levels"].insert(0, short)
    (tmp_path / "cand" / "summary.json").write_text(json.dumps(cand))
    code, out, _ = cli("compare", str(tmp_path / "base" / "summary.json"), str(tmp_path / "cand" / "summary.json"),
                       "--json", str(tmp_path / "c.json"), *history_of(pair))
    itl4 = next(c for c in json.loads((tmp_path / "c.json").read_text())["checks"] if c["name"] == "itl_ms.p95 @ 4 users")
    assert itl4["verdict"] == "regression", itl4["message"]
    assert code == 1
    # and the flag on the compared entry itself still holds it back
    short["host_contended"], at4["host_contended"] = False, True
    (tmp_path / "cand" / "summary.json").write_text(json.dumps(cand))
    cli("compare", str(tmp_path / "base" / "summary.json"), str(tmp_path / "cand" / "summary.json"), "--json", str(tmp_path / "c.json"),
        *history_of(pair))
    itl4 = next(c for c in json.loads((tmp_path / "c.json").read_text())["checks"] if c["name"] == "itl_ms.p95 @ 4 users")
    assert itl4["verdict"] == "inconclusive", itl4["message"]


def test_a_candidate_that_did_not_complete_is_said_and_blamed_not_the_levels(pair, tmp_path):
    """An interrupted candidate read "INCONCLUSIVE: …; longer levels would decide", with no word that it
    had been stopped: its missing levels are the stop's doing. Now every output warns of it, and the
    headline says so instead."""
    _, base, same, _ = pair
    sc = scenario_dict()
    plan = level_plan(sc["load"]["levels"], 10.0, t0=T0 + 3 * 86_400)
    rows = []
    for lv in plan:  # stopped 2 s into its third level: too few requests there to judge it
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], 10.0 if c < 4 else 2.0, ttft_ms=40.0 * c,
                                 itl_ms=10.0 * c, chunks=16, warmup_s=1.0, seed=9 + lv["index"], jitter=0.03)
    with contextlib.redirect_stdout(io.StringIO()):
        cut = write_folder(tmp_path / "cut", rows, plan, sc)
    run = json.loads((cut / "run.json").read_text())
    run.update(complete=False, stopped_by="signal", stop_signal="SIGINT")
    run["levels"][-1]["decision"] = {}  # the level in force when the stop came: never decided
    (cut / "run.json").write_text(json.dumps(run))
    assert cli("analyze", str(cut))[0] == 0
    code, out, _ = cli("compare", str(base), str(cut), "--json", str(tmp_path / "c.json"), "--markdown", str(tmp_path / "c.md"))
    report = json.loads((tmp_path / "c.json").read_text())
    assert report["incomplete"] == [f"candidate {cut}"]
    said = [w for w in report["warnings"] if w.startswith(f"candidate {cut}: the run did not complete: an interrupt (SIGINT)")]
    assert said and said[0] in (tmp_path / "c.md").read_text(), report["warnings"]
    assert code == 6, out  # the level cut short holds the capacity undecided
    assert report["headline"].endswith(f"candidate {cut} did not complete: compare runs that did."), report["headline"]
    assert "longer levels would decide" not in report["headline"]
    # a complete pair says nothing of the kind
    code, out, _ = cli("compare", str(base), str(same), "--json", str(tmp_path / "s.json"))
    assert not [w for w in json.loads((tmp_path / "s.json").read_text())["warnings"] if "did not complete" in w]


def test_a_warm_up_run_compared_is_said(pair, tmp_path):
    """gate.md: warm-up runs are "never compared nor counted in a history"; compare took one as a
    baseline without a word."""
    _, base, same, _ = pair
    warm = shutil.copytree(base, tmp_path / "warm")
    run = json.loads((warm / "run.json").read_text())
    run["warmup_run"] = True
    (warm / "run.json").write_text(json.dumps(run))
    cli("compare", str(warm), str(same), "--json", str(tmp_path / "c.json"))
    warnings = json.loads((tmp_path / "c.json").read_text())["warnings"]
    assert any(w.startswith(f"baseline {warm} is a warm-up run") for w in warnings), warnings


def test_fail_on_a_check_the_comparison_does_not_have_is_refused_not_a_silent_pass(pair):
    """A trial's scenario had only per-class SLOs: the gate compared no ITL, and ``--fail-on itl_ms.p95``
    passed, exit 0, a gate that could never fail. A check the comparison has still works."""
    _, base, same, _ = pair
    code, out, err = cli("compare", str(base), str(same), "--fail-on", "itl_ms.p99")
    assert code == 2 and "--fail-on itl_ms.p99: this comparison has no such check" in err, (out, err)
    assert "its checks: capacity" in err and "itl_ms.p95" in err and "\n" not in err.strip()
    assert cli("compare", str(base), str(same), "--fail-on", "itl_ms.p95,capacity")[0] in (0, 6)
    assert cli("compare", str(base), str(same), "--fail-on", "itl_ms")[0] in (0, 6)  # a metric: its checks
