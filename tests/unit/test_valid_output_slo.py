"""The valid-output floor (``slo.min_valid_output_rate``) and the gate's ``valid_output_rate`` check.

Synthetic records with known answers: at 1 and 2 users every structured answer is valid, at 4
users (where the "server" is also faster) every third one is broken. The floor of 0.9 must fail
that level and bind the capacity, and ``loadtest compare`` must call the faster, broken
candidate a regression: a server that gets faster by emitting broken JSON must not look better.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from loadtest.analysis import analyze
from loadtest.analysis.slo import SloSpec
from loadtest.cli import main
from loadtest.compare.rules import parse_rules
from loadtest.errors import InputError
from loadtest.scenario import parse_scenario
from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame, write_run_folder

T0 = 1_764_000_000.0
LEVELS = (1, 2, 4)
SCENARIO = {
    "name": "structured",
    "target": {"base_url": "http://127.0.0.1:8000/v1", "model": "mock-model", "api": "chat"},
    "workload": {"prompt_tokens": {"mean": 64, "stddev": 0}, "max_tokens": 16, "seed": 0,
                 "response_format": {"type": "json_object"}},
    "load": {"levels": list(LEVELS), "level_duration_s": 10, "warmup_s": 1, "warmup_requests": 0},
    "slo": {"itl_ms": {"p95": 10_000}, "max_error_rate": 0.5},
}


def _rows(broken_every: int, scale: float = 1.0, seed: int = 0, t0: float = T0) -> tuple[list, list]:
    """Closed-loop records; at 4 users every ``broken_every``-th answer is invalid (0: none)."""
    plan = level_plan(list(LEVELS), 10.0, t0=t0)
    rows = []
    for lv in plan:
        c = lv["concurrency"]
        level_rows = closed_loop_rows(lv["index"], c, lv["start_wall"], 10.0, ttft_ms=40.0 * c * scale,
                                      itl_ms=10.0 * c * scale, chunks=16, warmup_s=1.0, seed=seed + lv["index"],
                                      jitter=0.03)
        for i, row in enumerate(level_rows):
            row["output_valid"] = not (c == 4 and broken_every and i % broken_every == 0)
        rows += level_rows
    return rows, plan


def _analysis(slo: SloSpec):
    rows, plan = _rows(broken_every=3)
    return analyze(to_frame(rows), run_dict(plan, warmup_s=1.0), slo, resamples=200)


def test_the_floor_fails_the_broken_level_and_binds_the_capacity():
    analysis = _analysis(SloSpec.from_dict({"min_valid_output_rate": 0.9}))
    by_c = {lv.concurrency: lv for lv in analysis.levels}
    for c in (1, 2):
        check = by_c[c].check("valid_output_rate")
        assert check is not None and check.verdict == "pass" and check.value == 1.0 and by_c[c].status == "pass"
    broken = by_c[4].check("valid_output_rate")
    assert broken.verdict == "fail" and broken.value == pytest.approx(2 / 3, abs=0.02)
    assert broken.ci[0] <= broken.value <= broken.ci[1] < 0.9 and broken.n == by_c[4].valid_output_checked
    assert by_c[4].status == "fail"
    cap = analysis.capacity
    assert (cap.concurrency, cap.first_failing, cap.binding) == (2, 4, "valid_output_rate")
    assert cap.message.endswith("at 4 the valid output rate is 66.7% against a 90% floor.")


def test_without_a_floor_the_broken_level_passes_and_under_it_is_uncertain_near_the_floor():
    assert _analysis(SloSpec.from_dict({})).levels[2].check("valid_output_rate") is None
    # 2/3 valid on ~100 answers: a floor of 0.7 lies inside the Wilson interval: undecided, not a fail
    near = _analysis(SloSpec.from_dict({"min_valid_output_rate": 0.7})).levels[2].check("valid_output_rate")
    assert near.verdict == "uncertain" and near.reason


def test_no_check_where_nothing_was_checked():
    rows, plan = _rows(broken_every=0)
    for row in rows:
        row["output_valid"] = None  # a workload (or class) that asked for no structure
    analysis = analyze(to_frame(rows), run_dict(plan, warmup_s=1.0),
                       SloSpec.from_dict({"min_valid_output_rate": 0.99}), resamples=100)
    assert all(lv.check("valid_output_rate") is None and lv.status == "pass" for lv in analysis.levels)


def test_the_floor_parses_overrides_and_fails_in_one_line():
    spec = SloSpec.from_dict({"min_valid_output_rate": 0.99})
    assert spec.to_dict() == {"min_valid_output_rate": 0.99} and not spec.is_empty
    assert spec.with_overrides(["min_valid_output_rate=off"]).is_empty
    assert SloSpec().with_overrides(["min_valid_output_rate=0.95"]).min_valid_output_rate == 0.95
    assert "min_valid_output_rate" not in SloSpec().model_dump()  # stored SLOs without a floor are unchanged
    with pytest.raises(InputError, match=r"^--slo 'min_valid_output_rate=2': a valid-output rate is a fraction"):
        SloSpec().with_overrides(["min_valid_output_rate=2"])
    with pytest.raises(InputError, match=r"^scenario: slo.min_valid_output_rate: the workload asks for no structured"):
        parse_scenario({**SCENARIO, "workload": {"max_tokens": 16}, "slo": {"min_valid_output_rate": 0.9}})
    scenario = parse_scenario({**SCENARIO, "slo": {"min_valid_output_rate": 0.9}})
    assert scenario.slo.min_valid_output_rate == 0.9
    classes = {**SCENARIO["workload"], "classes": [{"name": "a", "weight": 1, "slo": {"e2e_ms": {"p95": 900}}}]}
    inherited = parse_scenario({**SCENARIO, "workload": classes, "slo": {"min_valid_output_rate": 0.9}})
    assert inherited.workload.classes[0].slo.min_valid_output_rate == 0.9  # like the error budget


def test_rules_know_the_check():
    rules = parse_rules(["valid_output_rate=0.5%"], ["valid_output_rate"])
    assert rules.tolerance_for("valid_output_rate") == 0.005 and rules.gates("valid_output_rate", "valid_output_rate")
    assert parse_rules().tolerance_for("valid_output_rate") == 0.01


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("valid-pair")
    base = write_run_folder(root / "base", *_rows(broken_every=0, seed=1), SCENARIO)
    cand = write_run_folder(root / "cand", *_rows(broken_every=3, scale=0.8, seed=2, t0=T0 + 86_400), SCENARIO)  # 20% faster, a third broken
    return base, cand


@pytest.mark.parametrize("records", [True, False], ids=["records", "summaries"])
def test_compare_calls_a_faster_server_with_broken_json_a_regression(pair, tmp_path, records):
    base, cand = pair
    out = tmp_path / "compare.json"
    args = [str(base), str(cand)] if records else [str(base / "summary.json"), str(cand / "summary.json")]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["compare", *args, "--json", str(out)])
    checks = {(c["check"], c["level"]): c for c in json.loads(out.read_text())["checks"]}
    broken = checks[("valid_output_rate", 4)]
    assert broken["verdict"] == "regression" and broken["fails_gate"] and not broken["relative"], broken
    assert broken["change"] == pytest.approx(-1 / 3, abs=0.03) and broken["ci"][1] < -0.01
    assert checks[("valid_output_rate", 1)]["verdict"] == "unchanged"
    assert checks[("itl_ms.p95", 4)]["verdict"] == "improvement"  # faster, and still a failed gate
    assert code == 1


def test_a_floor_too_high_for_the_answers_checked_says_so():
    """A 0.999 floor on ~100 answers: one invalid answer already puts the share under it (low_n)."""
    rows, plan = _rows(broken_every=0)
    measured = [r for r in rows if r["level_index"] == 2 and r["start_wall"] > plan[2]["start_wall"] + 2]
    measured[0]["output_valid"] = False  # one invalid answer at 4 users
    analysis = analyze(to_frame(rows), run_dict(plan, warmup_s=1.0), SloSpec.from_dict({"min_valid_output_rate": 0.999}),
                       resamples=200)
    broken = analysis.levels[2].check("valid_output_rate")
    assert broken.low_n and analysis.levels[0].check("valid_output_rate").low_n  # both levels hold ~100 answers
    words = [w for w in analysis.warnings if w.startswith("valid_output_rate is judged on so few checked answers")]
    assert len(words) == 1 and " 4 " in words[0], analysis.warnings  # only the level with an invalid answer


def test_a_floor_failed_by_many_invalid_answers_is_not_said_to_want_longer_levels():
    """A trial: "fail, decided early" beside "judged on so few checked answers … lengthen the levels". A third
    of the answers invalid fails a 0.999 floor whatever the sample: no low-n warning."""
    analysis = _analysis(SloSpec.from_dict({"min_valid_output_rate": 0.999}))
    broken = analysis.levels[2].check("valid_output_rate")
    assert broken.low_n and broken.verdict == "fail"
    assert not [w for w in analysis.warnings if "so few checked answers" in w], analysis.warnings
