"""summary.json: the interface keys, strict JSON (no NaN/Infinity), levels sorted by concurrency."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.analysis import SloSpec, analyze, analyze_run
from support.synthetic import SAMPLE_SLO as SLO
from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame, write_sample_run
from loadtest.errors import InputError
from loadtest.records import RequestWriter, records_to_table, write_run_json
from loadtest.report import write_reports
from loadtest.report.summary import summary_dict


def _strict(text: str):
    def reject(constant):
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=reject)


def make_run(tmp_path: Path, slo=SLO) -> Path:
    return write_sample_run(tmp_path, slo)


def test_summary_json_interface(tmp_path):
    run_dir = make_run(tmp_path)
    analysis = analyze_run(run_dir)
    paths = write_reports(run_dir, analysis)
    assert paths["summary"] == run_dir / "summary.json" and paths["html"] == run_dir / "report.html"
    summary = _strict(paths["summary"].read_text())

    cap = summary["capacity"]
    for key in ("concurrency", "first_failing", "binding", "verdict", "message"):
        assert key in cap
    assert (cap["concurrency"], cap["first_failing"], cap["binding"], cap["verdict"]) == (4, 8, "ttft_ms.p95", "found")
    assert isinstance(cap["message"], str) and "4 concurrent users" in cap["message"]

    for key in ("slo", "target", "name", "token_source", "itl_unit", "warnings", "levels"):
        assert key in summary
    assert summary["name"] == "chat-capacity"
    assert summary["itl_unit"] == "per_token"
    assert summary["slo"] == {"ttft_ms": {"p95": 500.0}, "itl_ms": {"p95": 45.0}, "max_error_rate": 0.01}
    assert summary["target"]["model"] == "mock-model"
    assert summary["token_source"]["primary"] == "usage"
    assert sum(summary["token_source"]["requests"].values()) == int(analysis.requests["ok"].sum())

    levels = summary["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2, 4, 8]
    level_keys = (
        "concurrency", "requests", "errors", "error_rate", "errors_by_kind", "ttft_ms", "itl_ms", "tpot_ms",
        "e2e_ms", "ttfb_ms", "output_tokens_per_s", "requests_per_s", "goodput_rps", "client_saturated",
        "refine", "spillover", "passed", "checks",
    )
    for lv in levels:
        for key in level_keys:
            assert key in lv, key
        for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "ttfb_ms"):
            assert set(lv[metric]) >= {"p50", "p90", "p95", "p99", "mean", "max", "n"}
        for check in lv["checks"]:
            assert set(check) >= {"name", "value", "ci", "limit", "verdict", "n", "low_n"}
            assert len(check["ci"]) == 2
        assert [c["name"] for c in lv["checks"]] == ["ttft_ms.p95", "itl_ms.p95", "error_rate"]
    top = levels[-1]
    assert top["passed"] is False and top["errors_by_kind"] == {"timeout": 40}
    assert top["ttft_ms"]["p95"] is None and top["ttft_ms"]["n_failed"] == 40  # +inf → null
    ttft_check = top["checks"][0]
    assert ttft_check["verdict"] == "fail" and ttft_check["value"] is None


def test_summary_has_no_nan_even_without_data():
    levels = level_plan([1, 2], 10.0)
    analysis = analyze(to_frame([]), run_dict(levels, slo=SLO), SloSpec.from_dict(SLO))
    summary = summary_dict(analysis)
    text = json.dumps(summary, allow_nan=False)  # raises on NaN/inf
    assert _strict(text)["capacity"]["verdict"] == "no_data"
    assert summary["levels"][0]["ttft_ms"]["p95"] is None


def test_analyze_run_applies_cli_overrides(tmp_path):
    run_dir = make_run(tmp_path)
    assert analyze_run(run_dir, ["itl_ms.p95=15"]).capacity.concurrency == 1
    relaxed = analyze_run(run_dir, ["ttft_ms.p95=off", "itl_ms.p95=1000", "max_error_rate=off"])
    assert relaxed.capacity.verdict == "at_least"
    with pytest.raises(InputError, match="itl_ms.p95=fast"):
        analyze_run(run_dir, ["itl_ms.p95=fast"])


def test_analyze_run_rejects_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(InputError, match="not a run folder"):
        analyze_run(tmp_path)


def test_analyze_run_reads_a_killed_run_from_its_part_files(tmp_path):
    levels = level_plan([1, 2], 10.0)
    rows = closed_loop_rows(0, 1, levels[0]["start_wall"], 9.0)
    writer = RequestWriter(tmp_path)
    writer.write(records_to_table(rows))  # never closed: no requests.parquet
    run = run_dict(levels, slo=SLO)
    run["complete"] = False
    write_run_json(tmp_path, run)
    analysis = analyze_run(tmp_path)
    assert analysis.level(1).requests == len(rows)
    assert analysis.capacity.concurrency == 1


def test_the_terminal_names_each_class_capacity_in_the_runs_load():
    """An open-loop run's classes read "each class alone holds: chat below the lowest level; …" where
    summary.json had 5, 5 and ≥ 8 req/s: only the users were read. Each mode's own figure now."""
    from types import SimpleNamespace

    from loadtest.analysis.results import Capacity
    from loadtest.report.terminal import _class_capacities

    def line(**classes):
        return _class_capacities(SimpleNamespace(capacity=SimpleNamespace(classes=classes)))

    rate = Capacity(None, "found", "", binding="ttft_ms.p50", rate_rps=5.0, first_failing_rate_rps=5.25)
    held = Capacity(None, "at_least", "", rate_rps=8.0)
    assert line(chat=rate, batch=held) == "each class alone holds: chat 5 req/s (fails at 5.25 req/s on ttft_ms.p50); batch ≥ 8 req/s"
    replay = Capacity(None, "found", "", binding="e2e_ms.p95", speedup=3.0, first_failing_speedup=3.5)
    assert line(long=replay) == "each class alone holds: long 3× (fails at 3.5× on e2e_ms.p95)"
    users = Capacity(4, "found", "", first_failing=5, binding="itl_ms.p95")
    below = Capacity(None, "below_minimum", "", first_failing=1, binding="itl_ms.p95")
    assert line(a=users, b=below) == ("each class alone holds: a 4 (fails at 5 on itl_ms.p95); "
                                      "b below the lowest level (fails at 1 on itl_ms.p95)")


def test_the_plain_verdict_names_the_load_a_rate_run_adds():
    """An open-loop or trace report said "with more users, the p95 TTFT breaks its limit first"."""
    from types import SimpleNamespace

    from loadtest.analysis.results import Capacity
    from loadtest.report.sections import plain_verdict

    slo = SloSpec.from_dict({"ttft_ms": {"p95": 500}})
    for cap, words in ((Capacity(None, "found", "", binding="ttft_ms.p95", rate_rps=8.0), "at higher rates"),
                       (Capacity(None, "found", "", binding="ttft_ms.p95", rate_rps=8.3, speedup=2.0), "with faster replay"),
                       (Capacity(4, "found", "", binding="ttft_ms.p95"), "with more users")):
        text = plain_verdict(SimpleNamespace(capacity=cap, slo=slo, run={}, levels=[]))
        assert f"; {words}, the " in text and "breaks its limit first" in text, text
