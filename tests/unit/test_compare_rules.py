"""The regression gate's rules as functions, on numbers and scenarios (no run folder, no CLI).

A verdict is only as sound as the pieces it is built from: an interval against a tolerance
(``classify``), a relative change where a failure is infinite, a bootstrap that resamples whole
requests, a capacity bracket, the fingerprint that says two runs ran the same workload, the
tolerance rules a CI job writes, the headline that names the check it held, the history table's
rows. Each is checked here on inputs small enough to know the answer, so that a failure in
test_compare_verdicts.py points at the run folders and the CLI, not at the arithmetic.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from loadtest.compare.capacity import CapacityBounds, capacity_change
from loadtest.compare.delta import percentile_replicates, relative_change
from loadtest.compare.change import Change, classify
from loadtest.fingerprint import differences, fingerprint
from loadtest.compare.rules import parse_rules
from loadtest.compare.samples import Clustered
from loadtest.errors import InputError
from support.gate_runs import held_change, scenario_dict


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


def _class_run(folder, chat_itl_p95: float, seed: int, day: int = 0, chat_scale: float = 1.0, top_slo=None):
    """A run of two request classes, each level's users half chat (its own ITL limit; its ITL times
    ``chat_scale``) and half long (the top-level SLO)."""
    from support.gate_runs import T0, scenario_dict, write_folder
    from support.synthetic import closed_loop_rows, level_plan

    sc = scenario_dict(levels=(2, 4), slo=top_slo)
    sc["workload"]["classes"] = [{"name": "chat", "slo": {"itl_ms": {"p95": chat_itl_p95}}}, {"name": "long"}]
    plan = level_plan([2, 4], 10.0, t0=T0 + day * 86_400)
    rows = []
    for lv in plan:
        half = lv["concurrency"] // 2
        for name, itl, offset in (("chat", 10.0 * half * chat_scale, 0), ("long", 10.0 * half, half)):
            part = closed_loop_rows(lv["index"], half, lv["start_wall"], 10.0, ttft_ms=40.0, itl_ms=itl, chunks=16,
                                    warmup_s=1.0, seed=seed + lv["index"] + offset, jitter=0.03)
            for row in part:
                row.update({"class": name, "request_id": f"{row['request_id']}-{name}", "user": row["user"] + offset,
                            "level": lv["concurrency"]})
            rows += part
    return write_folder(folder, rows, plan, sc)


def test_a_changed_class_slo_is_compared_under_the_candidates_and_said(tmp_path):
    """A class's SLO is how the work is judged, not the work: it was in the fingerprint, so tightening one
    refused the nightly comparison (exit 2, "different workloads"). Both runs are now judged under the
    candidate's class SLOs, and a warning says the SLO changed."""
    import json as _json

    from support.gate_runs import cli

    base, cand = _class_run(tmp_path / "base", 200.0, 1), _class_run(tmp_path / "cand", 150.0, 2, day=1)
    code, out, err = cli("compare", str(base), str(cand), "--json", str(tmp_path / "c.json"))
    assert code in (0, 6), out + err  # compared (never refused as another workload)
    report = _json.loads((tmp_path / "c.json").read_text())
    said = [w for w in report["warnings"] if "request class's SLO differs" in w]
    assert said and "chat: baseline itl_ms.p95≤200" in said[0] and "candidate itl_ms.p95≤150" in said[0], report["warnings"]
    assert "both runs are judged under the candidate's" in said[0]
    assert not [w for w in report["warnings"] if "long:" in w]  # the class that holds the top-level SLO is not named


def test_a_class_slower_inside_a_steady_mix_fails_on_its_own_slo_check(tmp_path):
    """The top-level SLO judges TTFT only; chat's own SLO its ITL p95. A candidate whose chat ITL is 40%
    slower had no check that could see it (the gate compared the top-level SLO's checks only): it is
    now judged as ``chat.itl_ms.p95`` against the reference runs' own chat figures, and fails the gate.
    The long class holds the top-level SLO and adds no check of its own."""
    import json as _json

    from support.gate_runs import cli

    top = {"ttft_ms": {"p95": 10_000}, "max_error_rate": 0.5}
    history = tmp_path / "history"
    for i, scale in enumerate((1.0, 1.03, 0.97)):
        _class_run(history / f"run-{i}", 200.0, 10 + i, day=i, chat_scale=scale, top_slo=top)
    base = _class_run(tmp_path / "base", 200.0, 1, day=5, top_slo=top)
    same = _class_run(tmp_path / "same", 200.0, 2, day=6, chat_scale=1.02, top_slo=top)
    slow = _class_run(tmp_path / "slow", 200.0, 3, day=7, chat_scale=1.4, top_slo=top)
    code, out, err = cli("compare", str(base), str(slow), "--history", str(history), "--json", str(tmp_path / "s.json"))
    checks = {c["name"]: c for c in _json.loads((tmp_path / "s.json").read_text())["checks"]}
    chat = checks["chat.itl_ms.p95 @ 4 users"]
    assert chat["verdict"] == "regression" and chat["gating"] and chat["noise"] == "history", chat
    assert chat["change"] > 0.3 and "chat.itl_ms.p95 at 4 users" in chat["message"], chat["message"]
    assert code == 1, out + err
    assert not [name for name in checks if name.startswith("long.")]  # the top-level SLO's class: no check of its own
    # the same server again: no regression; and --fail-on names a class's check (or its metric)
    assert cli("compare", str(base), str(same), "--history", str(history))[0] == 0
    assert cli("compare", str(base), str(slow), "--history", str(history), "--fail-on", "chat.itl_ms.p95")[0] == 1
    assert cli("compare", str(base), str(slow), "--history", str(history), "--fail-on", "itl_ms.p95")[0] == 1
    assert cli("compare", str(base), str(slow), "--history", str(history), "--fail-on", "ttft_ms")[0] == 0
    code, _, err = cli("compare", str(base), str(slow), "--fail-on", "chta.itl_ms.p95")
    assert code == 2 and "chta.itl_ms.p95" in err, err
    code, _, err = cli("compare", str(base), str(slow), "--tolerance", "chta.itl_ms.p95=3%")
    assert code == 2 and "--tolerance chta.itl_ms.p95: this comparison has no such request-class check" in err, err
    assert "chat.itl_ms.p95" in err and len(err.strip().splitlines()) == 1


def test_a_class_check_is_written_in_every_output(tmp_path):
    from support.gate_runs import cli

    base = _class_run(tmp_path / "base", 200.0, 1, top_slo={"ttft_ms": {"p95": 10_000}})
    slow = _class_run(tmp_path / "slow", 200.0, 3, day=1, chat_scale=1.4, top_slo={"ttft_ms": {"p95": 10_000}})
    code, out, err = cli("compare", str(base), str(slow), "--markdown", str(tmp_path / "c.md"),
                         "--html", str(tmp_path / "c.html"), "--junit", str(tmp_path / "c.xml"))
    assert code in (1, 6), out + err
    for name in ("c.md", "c.html", "c.xml"):
        assert "chat.itl_ms.p95" in (tmp_path / name).read_text(), name
    assert "chat: p95 ITL (ms)" in (tmp_path / "c.html").read_text()  # its plot's title names the class
