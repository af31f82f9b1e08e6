"""The regression gate on synthetic run folders (known answers, no load): verdicts, flags, outputs, history."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from support.synthetic import closed_loop_rows, level_plan, write_run_folder
from loadtest.cli import main
from loadtest.compare.capacity import CapacityBounds, capacity_change
from loadtest.compare.delta import percentile_replicates, relative_change
from loadtest.compare.change import Change, classify
from loadtest.fingerprint import differences, fingerprint
from loadtest.compare.rules import parse_rules
from loadtest.compare.samples import Clustered
from loadtest.errors import InputError

SLO = {"ttft_ms": {"p95": 10_000}, "itl_ms": {"p95": 10_000}, "max_error_rate": 0.5}
T0 = 1_764_000_000.0


def scenario_dict(name="nightly", levels=(1, 2, 4), slo=None, max_tokens=16):
    return {
        "name": name,
        "target": {"base_url": "http://127.0.0.1:8000/v1", "model": "mock-model", "api": "chat"},
        "workload": {"prompt_tokens": {"mean": 64, "stddev": 0}, "max_tokens": max_tokens, "seed": 0},
        "load": {"levels": list(levels), "level_duration_s": 10, "warmup_s": 1, "warmup_requests": 0},
        "slo": slo or SLO,
    }


def write_run(folder: Path, *, scale=1.0, seed=0, t0=T0, jitter=0.03, duration=10.0, itl_per_user=10.0, fail_every=0,
              **scenario):
    """A run folder whose latencies grow with concurrency, times ``scale`` (1.2 = 20% slower);
    every ``fail_every``-th request an HTTP 5xx."""
    sc = scenario_dict(**scenario)
    plan = level_plan(sc["load"]["levels"], duration, t0=t0)
    rows = []
    for lv in plan:
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], duration, ttft_ms=40.0 * c * scale,
                                 itl_ms=itl_per_user * c * scale, chunks=16, warmup_s=1.0, seed=seed + 7 * lv["index"],
                                 jitter=jitter, fail_every=fail_every)
    return write_folder(folder, rows, plan, sc)


def write_folder(folder: Path, rows: list, plan: list, sc: dict) -> Path:
    """Records, run.json (with its scenario) and an analysis: a run folder as ``loadtest run`` leaves it."""
    return write_run_folder(folder, rows, plan, sc)


def held_change(check: str, kind: str, level: int, change: float, tolerance: float = 0.05, **extra) -> Change:
    """A gating level check the gate held (inconclusive, may regress), its point ``change``."""
    return Change(check, kind, level, 1.0, 1.0 + change, change, (change - 0.1, change + 0.1), kind != "error_rate",
                  tolerance, "inconclusive", True, True, message=f"{check} at {level} users {change:+.0%}", **extra)


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


#: Earlier runs of the same server, under the pair's folder: with the baseline, the 3 reference runs
#: the gate needs to know the run-to-run noise (without it no speed's change is a regression).
EARLIER = "earlier"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    with contextlib.redirect_stdout(io.StringIO()):
        for i in range(2):
            write_run(root / EARLIER / f"night-{i}", seed=20 + i, t0=T0 - (2 - i) * 86_400)
        base = write_run(root / "base", seed=1)
        same = write_run(root / "same", seed=2, t0=T0 + 86_400)
        slow = write_run(root / "slow", seed=3, t0=T0 + 2 * 86_400, scale=1.2)
    return root, base, same, slow


def history_of(pair) -> tuple[str, str]:
    """``--history`` with the pair's earlier runs."""
    return "--history", str(pair[0] / EARLIER)


# -- the verdict rules --------------------------------------------------------------------------


def test_classify_by_interval_and_tolerance():
    assert classify(0.06, 0.20, 0.05) == ("regression", True)
    assert classify(-0.20, -0.06, 0.05) == ("improvement", False)
    assert classify(-0.04, 0.04, 0.05) == ("unchanged", False)
    assert classify(0.01, 0.09, 0.05) == ("inconclusive", True)  # may be worse than tolerated
    assert classify(-0.09, 0.01, 0.05) == ("inconclusive", False)  # can only be better
    assert classify(math.nan, math.nan, 0.05) == ("inconclusive", True)


def test_a_rate_with_no_event_in_either_run_claims_no_interval():
    """0 failures of 24 against 0 of 27 read "+0.0 pp [+0.0 pp, +0.0 pp]": the resampled requests
    are all alike, so the interval collapses, and a certainty 24 requests cannot give was printed."""
    from loadtest.compare.change import describe_change

    def change(kind, b, c, ci):
        return Change(check=kind, kind=kind, level=4, baseline=b, candidate=c, change=c - b, ci=ci,
                      relative=False, tolerance=0.01, verdict="unchanged", may_regress=False, gating=True)

    text = describe_change(change("error_rate", 0.0, 0.0, (0.0, 0.0)), 0.9875)
    assert "[+0.0 pp, +0.0 pp]" not in text and "no request failed in either run, so no interval" in text
    text = describe_change(change("valid_output_rate", 1.0, 1.0, (0.0, 0.0)), 0.9875)
    assert "every checked answer was valid in both runs, so no interval" in text
    # an interval that the requests did give is printed as before
    text = describe_change(change("error_rate", 0.02, 0.03, (-0.01, 0.03)), 0.9875)
    assert "+1.0 pp [-1.0 pp, +3.0 pp]" in text


def test_relative_change_edge_cases():
    got = relative_change(np.array([110.0, np.inf, 50.0, np.inf, 0.0]), np.array([100.0, 100.0, np.inf, np.inf, 0.0]))
    assert got[0] == pytest.approx(0.10)
    assert got[1] == np.inf and got[2] == -1.0 and got[3] == 0.0 and got[4] == 0.0


def test_request_resampling_is_wider_than_sample_resampling_when_a_request_is_slow_throughout():
    """40 requests × 50 tokens, 4 requests entirely slow: the tail belongs to whole requests."""
    values = np.concatenate([np.full(50, 10.0 + (30.0 if r < 4 else 0.0)) + np.arange(50) * 1e-3 for r in range(40)])
    owner = np.repeat(np.arange(40), 50)
    clustered = percentile_replicates(Clustered(values, owner, 40), 0.95, np.random.default_rng(0), 2000)
    independent = percentile_replicates(Clustered(values, np.arange(len(values)), len(values)), 0.95,
                                        np.random.default_rng(0), 2000)
    spread = lambda reps: np.subtract(*np.percentile(reps, [97.5, 2.5]))  # noqa: E731
    assert spread(clustered) > 5 * max(spread(independent), 1e-3)


def test_capacity_certain_drop_is_a_regression_and_an_uncertain_one_is_inconclusive():
    def levels(*statuses):
        return [{"concurrency": c, "status": s} for c, s in zip((1, 2, 4, 8), statuses)]

    base = CapacityBounds.from_levels(levels("pass", "pass", "pass", "fail"))
    assert (base.lower, base.upper) == (4, 4)
    certain = CapacityBounds.from_levels(levels("pass", "fail", "fail", "fail"))
    shaky = CapacityBounds.from_levels(levels("pass", "uncertain", "fail", "fail"))
    assert (shaky.lower, shaky.upper) == (1, 2)
    drop = capacity_change({"concurrency": 4}, base, {"concurrency": 1}, certain, True)
    assert drop.verdict == "regression" and drop.fails_gate
    maybe = capacity_change({"concurrency": 4}, base, {"concurrency": 2}, CapacityBounds.from_levels(
        levels("pass", "pass", "uncertain", "fail")), True)
    assert maybe.verdict == "inconclusive" and maybe.holds_gate
    same = capacity_change({"concurrency": 4}, base, {"concurrency": 4}, base, True)
    assert same.verdict == "unchanged"
    more = capacity_change({"concurrency": 4}, base, {"concurrency": 8},
                           CapacityBounds.from_levels(levels("pass", "pass", "pass", "pass")), True)
    assert more.verdict == "improvement"


def test_fingerprint_ignores_seed_and_spelling_but_not_the_workload():
    a = scenario_dict()
    b = scenario_dict()
    b["workload"]["seed"] = 42
    b["workload"]["prompt_tokens"] = {"mean": 64, "stddev": 0.0}
    assert fingerprint(a)["hash"] == fingerprint(b)["hash"]
    ranged = scenario_dict()
    ranged["load"] = {"start": 1, "step": 2, "max": 4, "level_duration_s": 10.0, "warmup_s": 1, "warmup_requests": 0}
    assert fingerprint(ranged)["levels"] == [1, 2, 4] and fingerprint(ranged)["hash"] == fingerprint(a)["hash"]
    c = scenario_dict(max_tokens=32, levels=(1, 2, 8))
    assert differences(fingerprint(a), fingerprint(c)) == ["levels: [1,2,4] → [1,2,8]", "workload.max_tokens: 16 → 32"]


def test_fingerprint_hashes_a_named_dataset(tmp_path):
    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "a"}\n')
    sc = scenario_dict()
    sc["workload"]["dataset"] = {"path": str(data)}
    before = fingerprint(sc)
    data.write_text('{"prompt": "b"}\n')
    after = fingerprint(sc)
    assert before["datasets"][str(data)] != after["datasets"][str(data)]
    assert differences(before, after) == [f"datasets.{data}: {before['datasets'][str(data)]} → {after['datasets'][str(data)]}"]


def test_rules_parse_tolerances_and_reject_nonsense():
    rules = parse_rules(["5%", "itl_ms.p95=3% ttft_ms=10%", "throughput=0.02", "error_rate=0.5%"], ["latency,capacity"])
    assert rules.tolerance_for("itl_ms.p95") == pytest.approx(0.03)
    assert rules.tolerance_for("ttft_ms.p99") == pytest.approx(0.10)
    assert rules.tolerance_for("output_tokens_per_s") == pytest.approx(0.02)
    assert rules.tolerance_for("error_rate") == pytest.approx(0.005)
    assert rules.gates("itl_ms.p95", "latency") and not rules.gates("error_rate", "error_rate")
    for bad in (["itl.p95=3%"], ["itl_ms.p97=3%"], ["five"], ["-1%"]):
        with pytest.raises(InputError):
            parse_rules(bad)
    with pytest.raises(InputError):
        parse_rules([], ["latencies"])


# -- compare on run folders ---------------------------------------------------------------------


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


def test_the_inconclusive_headline_names_the_change_furthest_past_its_tolerance():
    """It named the first held check by level: for an unchanged llama-server, "itl_ms.p95 at 2 users
    +8.9% [-6.9%, +19.1%]", while the +198% at 4 users that only the unknown noise held came next."""
    from loadtest.compare.engine import Comparison

    changes = [held_change("itl_ms.p95", "latency", 2, 0.089), held_change("itl_ms.p95", "latency", 4, 1.98),
               held_change("output_tokens_per_s", "throughput", 4, -0.3),
               held_change("error_rate", "error_rate", 4, 0.015, 0.01)]
    cmp = Comparison(None, None, {}, {}, parse_rules([]), changes)  # type: ignore[arg-type]
    assert cmp.headline.startswith("INCONCLUSIVE: itl_ms.p95 at 4 users +198% (and 3 more)"), cmp.headline
    cmp.changes = changes + [held_change("ttft_ms.p95", "latency", 1, float("inf"))]  # a failure's infinity first
    assert cmp.headline.startswith("INCONCLUSIVE: ttft_ms.p95 at 1 users"), cmp.headline


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


def test_incomparable_runs_and_bad_input_exit_2_with_one_line(pair, tmp_path):
    _, base, _, _ = pair
    with contextlib.redirect_stdout(io.StringIO()):
        other = write_run(tmp_path / "other", levels=(1, 2, 8))
    code, out, err = cli("compare", str(base), str(other))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "levels: [1,2,4] → [1,2,8]" in err
    code, _, err = cli("compare", str(base), str(tmp_path / "missing"))
    assert code == 2 and "no such run folder" in err
    code, _, err = cli("compare", str(base), str(base), "--tolerance", "itl_ms.p97=3%")
    assert code == 2 and "p97" in err
    # a run compared with itself would pass every check: refused, as a folder or its summary.json
    for same in (str(base), str(base / "summary.json"), str(base) + "/"):
        code, out, err = cli("compare", str(base), same)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "is the same run as" in err, err
        assert "Traceback" not in err and "No regression" not in out
    # so is a copy of it elsewhere (a promotion run twice, a candidate path pointed at the baseline's
    # copy), which passed every check; as a candidate, and among the --also-* runs
    copy = shutil.copytree(base, tmp_path / "copy")
    for args in ([str(base), str(copy)], [str(copy), str(base)]):
        code, out, err = cli("compare", *args)
        assert code == 2 and "is the same run as" in err and "a copy: 'nightly', started" in err, err
        assert len(err.strip().splitlines()) == 1 and "No regression" not in out
    _, _, same, _ = pair
    code, out, err = cli("compare", str(base), str(same), "--also-candidate", str(copy))
    assert code == 2 and f"--also-candidate {copy} is the same run as baseline {base}" in err, err
    code, out, err = cli("compare", str(base), str(same), "--also-baseline", str(same))
    assert code == 2 and f"candidate {same} is the same run as --also-baseline {same} (the same folder): give each run once" \
        in err, err


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


def test_a_summary_without_levels_and_no_records_is_refused_not_passed(pair, tmp_path):
    """A summary cut to its capacity (no ``levels``) in a folder without records passed the gate
    as "no regression": only the capacity was compared. It is not a summary the gate can judge."""
    _, base, same, _ = pair
    gutted = tmp_path / "gutted"
    shutil.copytree(same, gutted)
    summary = json.loads((gutted / "summary.json").read_text())
    del summary["levels"]
    (gutted / "summary.json").write_text(json.dumps(summary))
    (gutted / "requests.parquet").unlink()
    for args in ((str(base), str(gutted)), (str(gutted), str(base)), (str(base), str(gutted / "summary.json"))):
        code, out, err = cli("compare", *args)
        assert code == 2 and "No regression" not in out, out
        assert f"{gutted / 'summary.json'}: not a loadtest summary ('levels'" in err and len(err.splitlines()) == 1


def test_records_of_another_kind_or_a_damaged_part_are_named(pair, tmp_path):
    """Another Parquet table copied over requests.parquet was read as a run with no requests: ``analyze``
    wrote "no request was measured" over a good summary, and ``compare`` named the merged file for a
    damaged part file. Each is now one line naming the file, exit 2, and the folder is left as it was."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, base, same, _ = pair
    other = tmp_path / "other"
    shutil.copytree(same, other)
    pq.write_table(pa.table({"wall": [1.0], "name": ["vllm:num_requests_running"], "value": [1.0]}),
                   other / "requests.parquet")
    before = (other / "summary.json").read_bytes()
    code, _, err = cli("analyze", str(other))
    assert code == 2 and f"{other / 'requests.parquet'}: not a loadtest records file (no column 'request_id'" in err
    assert (other / "summary.json").read_bytes() == before
    assert cli("compare", str(base), str(other))[0] == 2
    parts = tmp_path / "parts"
    shutil.copytree(same, parts)
    (parts / "requests.parts").mkdir()
    (parts / "requests.parquet").rename(parts / "requests.parts" / "part-0000.parquet")
    (parts / "requests.parts" / "part-0001.parquet").write_bytes(b"PAR1x")
    code, _, err = cli("compare", str(base), str(parts))
    assert code == 2 and f"candidate {parts / 'requests.parts' / 'part-0001.parquet'}: not a readable Parquet" in err


def test_analyze_goes_on_without_unreadable_server_metrics_and_names_a_bad_slo_in_run_json(pair, tmp_path):
    """A damaged server_metrics.parquet was a traceback (the requests, the measurement, were never judged);
    a bad limit in run.json's scenario was a line that did not say which file holds it."""
    _, _, same, _ = pair
    run = tmp_path / "run"
    shutil.copytree(same, run)
    (run / "server_metrics.parquet").write_bytes(b"")
    code, out, err = cli("analyze", str(run))
    assert code == 0 and "Traceback" not in err, err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["levels"] and any("server_metrics.parquet) could not be read" in w for w in summary["warnings"])
    meta = json.loads((run / "run.json").read_text())
    meta["scenario"]["slo"] = {"itl_ms": {"p95": -1}}
    (run / "run.json").write_text(json.dumps(meta))
    code, _, err = cli("analyze", str(run))
    assert code == 2 and f"{run / 'run.json'}: scenario.slo.itl_ms.p95" in err


def test_analyze_names_a_summary_it_cannot_replace_and_leaves_no_temporary(pair, tmp_path):
    """A folder where summary.json should be: the line named summary.json.tmp and left it behind."""
    _, _, same, _ = pair
    run = tmp_path / "run"
    shutil.copytree(same, run)
    (run / "summary.json").unlink()
    (run / "summary.json").mkdir()
    code, _, err = cli("analyze", str(run))
    assert code == 2 and f"{run / 'summary.json'}: is a directory" in err, err
    assert ".tmp" not in err and not (run / "summary.json.tmp").exists()


def test_new_summaries_carry_the_fingerprint(pair):
    _, base, _, _ = pair
    summary = json.loads((base / "summary.json").read_text())
    assert summary["fingerprint"]["levels"] == [1, 2, 4] and summary["fingerprint"]["hash"]


# -- history --------------------------------------------------------------------------------------


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


def test_history_names_a_run_it_skips_for_want_of_a_summary_or_records(pair, tmp_path):
    """A run folder with a run.json but neither summary.json nor readable records was left out
    without a word (the CHANGELOG promised one line)."""
    root, base, _, _ = pair
    empty = tmp_path / "runs" / "empty"
    empty.mkdir(parents=True)
    shutil.copy(base / "run.json", empty / "run.json")
    code, _, err = cli("history", str(root), str(tmp_path / "runs"), "--html", str(tmp_path / "h.html"))
    assert code == 0, err
    assert f"loadtest history: skipped {empty}: no records" in err, err


def test_history_says_why_a_run_was_not_compared_with_the_previous_one(pair, tmp_path):
    """The table's ``vs_previous`` said "error" and nothing said which error."""
    root, base, same, _ = pair
    runs = tmp_path / "runs"
    shutil.copytree(base, runs / "a")
    shutil.copytree(same, runs / "b")
    (runs / "b" / "requests.parquet").write_bytes(b"")
    code, out, err = cli("history", str(runs), "--html", str(tmp_path / "h.html"))
    assert code == 0, err
    assert f"b: not compared with the previous run: candidate {runs / 'b' / 'requests.parquet'}: not a readable" in out


def test_run_refuses_gate_flags_without_a_baseline_and_a_missing_baseline(tmp_path):
    scenario = str(Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml")
    code, _, err = cli("run", scenario, "--junit", str(tmp_path / "j.xml"), "--out", str(tmp_path / "run"))
    assert code == 2 and "--junit" in err and "--baseline" in err
    code, _, err = cli("run", scenario, "--baseline", str(tmp_path / "nowhere"), "--out", str(tmp_path / "run"))
    assert code == 2 and "no such run folder" in err
    assert not (tmp_path / "run").exists()  # refused before anything was started


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


def _as_open_loop(run: Path, out: Path, mode: str) -> Path:
    """A copy of ``run`` whose run.json says its levels were rates (``open_loop``) or speedups."""
    shutil.copytree(run, out)
    meta = json.loads((out / "run.json").read_text())
    meta["load_mode"] = mode
    (out / "run.json").write_text(json.dumps(meta))
    return out


@pytest.mark.parametrize("mode, words", [("open_loop", "an open-loop run (load.rates)"),
                                         ("trace_replay", "a trace replay (load.speedups)")])
def test_compare_and_history_refuse_runs_whose_levels_are_rates(pair, tmp_path, mode, words):
    """Levels are matched by concurrent users: an open loop's all read 0, and only its largest rate
    was compared ("No regression", exit 0, "ttft_ms.p95 at 0 users") while the others went unjudged."""
    _, base, same, _ = pair
    a, b = _as_open_loop(base, tmp_path / "a", mode), _as_open_loop(same, tmp_path / "b", mode)
    code, out, err = cli("compare", str(a), str(b))
    assert code == 2 and not out, out
    assert err.strip().splitlines() == [
        f"loadtest compare: error: baseline {a} is {words}: compare, the gate and history judge closed-loop "
        "runs (load.levels of concurrent users) only, so far; its levels are rates"], err
    code, _, err = cli("compare", str(base), str(b), "--history", str(tmp_path))
    assert code == 2 and f"candidate {b} is {words}" in err and "Traceback" not in err
    code, _, err = cli("history", str(tmp_path), "--html", str(tmp_path / "h.html"))
    assert code == 2 and f"skipped {a}: {words}; history compares closed-loop runs only" in err, err
    assert not (tmp_path / "h.html").exists()
    shutil.copytree(same, tmp_path / "c")  # beside a closed-loop run of the scenario, the other is skipped, not fatal
    code, out, err = cli("history", str(tmp_path), "--html", str(tmp_path / "h.html"))
    assert code == 0 and f"skipped {b}: {words}" in err and " c" in out, (out, err)


def test_a_bare_summary_of_rate_levels_is_refused_too(pair, tmp_path):
    """A summary.json alone (records not kept) says its mode by its levels' rate_rps and speedup."""
    _, base, same, _ = pair
    summary = json.loads((base / "summary.json").read_text())
    for i, level in enumerate(summary["levels"]):
        level["concurrency"], level["rate_rps"], level["speedup"] = 0, 2.0 * (i + 1), None
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    code, _, err = cli("compare", str(tmp_path / "summary.json"), str(same))
    assert code == 2 and f"baseline {tmp_path / 'summary.json'} is an open-loop run (load.rates)" in err, err


def test_run_with_a_baseline_refuses_a_rate_scenario_before_any_load(pair, tmp_path):
    scenario = tmp_path / "rates.yaml"
    scenario.write_text(json.dumps({**scenario_dict(), "load": {"rates": [2, 4], "level_duration_s": 10, "warmup_s": 1}}))
    code, _, err = cli("run", str(scenario), "--baseline", str(pair[1]), "--out", str(tmp_path / "run"))
    assert code == 2 and f"--baseline: the run of {scenario} is an open-loop run (load.rates)" in err, err
    assert not (tmp_path / "run").exists()  # refused before anything was started


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


@pytest.mark.parametrize("q", [0.5, 0.95, 0.99])
def test_percentile_replicates_equal_the_quantile_of_the_expanded_resample(q):
    """Each replicate is numpy's quantile of the drawn requests' pooled samples, exactly."""
    rng = np.random.default_rng(3)
    per = rng.integers(1, 40, size=60)
    owner = np.repeat(np.arange(60), per)
    values = rng.gamma(2.0, 10.0, size=len(owner)) + owner * 0.5  # requests differ, as real ones do
    got = percentile_replicates(Clustered(values, owner, 60), q, np.random.default_rng(9), 300)
    counts = np.random.default_rng(9).multinomial(60, np.full(60, 1 / 60), size=300)
    want = [np.quantile(np.repeat(values, c[owner]), q) for c in counts]
    assert np.allclose(got, want)


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


def test_the_stored_fingerprint_with_its_hash_is_the_one_compare_uses(tmp_path):
    """run.json keeps the compare fingerprint (``compare_fingerprint``, with its ``hash`` and the
    dataset hashes taken at run time) beside the workload's own record (``workload_fingerprint``);
    a dataset edited after the run must not change the run's fingerprint."""
    from loadtest.fingerprint import fingerprint_of_run
    from loadtest.run_state import initial_record
    from loadtest.scenario import parse_scenario

    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "a"}\n')
    sc = scenario_dict()
    sc["workload"]["dataset"] = {"path": str(data)}
    meta = json.loads(json.dumps(initial_record(parse_scenario(sc)).to_json()))  # as written to run.json
    stored = meta["compare_fingerprint"]
    assert stored["hash"] and stored["datasets"][str(data)]
    assert "classes" in meta["workload_fingerprint"] and "hash" not in meta["workload_fingerprint"]
    data.write_text('{"prompt": "b"}\n')  # the file changes after the run
    assert fingerprint(meta["scenario"])["hash"] != stored["hash"]
    assert fingerprint_of_run(meta) == stored
    # An old run folder (no compare_fingerprint) still loads: recomputed from its scenario.
    old = {k: v for k, v in meta.items() if k != "compare_fingerprint"}
    assert fingerprint_of_run(old)["hash"] == fingerprint(meta["scenario"])["hash"]


def test_history_says_plainly_when_a_run_measured_no_level():
    """A run without a measured level read "at least 0, no certain failure up to None" in history,
    and the table quoted its percentiles at "@None"."""
    from pathlib import Path

    from loadtest.compare.history import HistoryRun
    from loadtest.compare.history_page import table_rows

    empty = CapacityBounds.from_levels([{"concurrency": 4, "status": "no_data"}])
    assert empty.text() == "no level measured"
    measured = CapacityBounds.from_levels([{"concurrency": 1, "status": "pass"}, {"concurrency": 2, "status": "fail"}])
    runs = [HistoryRun(Path("a"), "n", 1.0, "f", {"levels": [{"concurrency": 1, "status": "pass"}]}, measured),
            HistoryRun(Path("b"), "n", 2.0, "f", {"levels": []}, empty)]
    rows = table_rows(runs)
    assert [row["bracket"] for row in rows] == [measured.text(), "no level measured"]
    assert not any("None" in key for row in rows for key in row)


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


def test_a_history_of_links_to_run_folders_is_read(pair, tmp_path):
    """A history kept as symbolic links to dated run folders was found empty (``Path.rglob`` does not
    enter a linked folder): the gate then judged without its noise. A link back to an ancestor must
    not loop, and a run reached twice counts once."""
    root, base, same, _ = pair
    links = tmp_path / "links"
    links.mkdir()
    for run in sorted((root / EARLIER).iterdir()):
        (links / run.name).symlink_to(run, target_is_directory=True)
    (links / "again").symlink_to(root / EARLIER, target_is_directory=True)  # the same runs by another path
    (links / "loop").symlink_to(links, target_is_directory=True)
    (links / "broken").symlink_to(tmp_path / "nowhere", target_is_directory=True)
    # a link above the history's folder is not followed: the run beside it is not part of the history
    (links / "up").symlink_to(tmp_path, target_is_directory=True)
    with contextlib.redirect_stdout(io.StringIO()):
        write_run(tmp_path / "beside" / "night-x", seed=30, t0=T0 - 5 * 86_400)
    code, out, _ = cli("compare", str(base), str(same), "--history", str(links), "--json", str(tmp_path / "c.json"))
    assert code == 0, out
    assert json.loads((tmp_path / "c.json").read_text())["history_runs"] == 3  # the baseline and the 2 earlier runs
    # given itself, that run's folder is read
    code, out, _ = cli("compare", str(base), str(same), "--history", str(links), str(tmp_path / "beside"),
                       "--json", str(tmp_path / "c.json"))
    assert json.loads((tmp_path / "c.json").read_text())["history_runs"] == 4, out


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


def test_run_with_a_baseline_refuses_a_missing_history_before_any_load(pair, tmp_path):
    """A trial: ``run --baseline B --history nofolder`` ran the whole load (the warm-up run too) and only
    then ended "--history nofolder: no such folder", a night without a verdict."""
    scenario = tmp_path / "same.yaml"
    scenario.write_text(json.dumps(scenario_dict()))
    code, _, err = cli("run", str(scenario), "--baseline", str(pair[1]), "--history", str(tmp_path / "nowhere"),
                       "--out", str(tmp_path / "run"))
    assert code == 2 and err.strip() == f"loadtest run: error: --history {tmp_path / 'nowhere'}: no such folder", err
    assert not (tmp_path / "run").exists() and not (tmp_path / "run-warmup").exists()  # refused before anything


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
