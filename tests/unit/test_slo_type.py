"""One SLO type: the scenario's ``slo:``, a class's ``slo:``, run.json's copy and ``--slo`` agree.

Before, the scenario had its own pydantic ``Slo`` (four metrics) beside the
analysis' ``SloSpec`` (five): ``--slo ttfb_ms.p95=…`` was accepted while
``slo: {ttfb_ms: …}`` was refused. TTFB is measured per request with
percentiles like TTFT, so both accept it now, and a TTFB limit judges levels.
"""

from __future__ import annotations

import pytest

from loadtest.analysis import analyze_run
from loadtest.analysis.slo import SloSpec
from support.synthetic import write_sample_run
from loadtest.errors import InputError
from loadtest.scenario import parse_scenario


def _scenario(slo: dict, classes: list | None = None):
    data = {"name": "x", "load": {"levels": [1]}, "slo": slo}
    if classes is not None:
        data["workload"] = {"classes": classes}
    return parse_scenario(data)


def test_the_scenario_holds_the_analysis_type_and_run_json_round_trips():
    s = _scenario({"itl_ms": {"p95": 50}, "ttfb_ms": {"p99": 300}}, classes=[{"name": "a", "slo": {"ttfb_ms": {"p95": 9}}}])
    assert type(s.slo) is SloSpec and type(s.workload.classes[0].slo) is SloSpec
    stored = s.public_dict()["slo"]  # what run.json holds
    assert stored["ttfb_ms"] == {"p99": 300.0} and stored["max_error_rate"] == 0.01
    assert SloSpec.from_dict(stored) == s.slo
    # a class SLO without its own budget keeps the top-level one, as before
    assert s.workload.classes[0].slo.max_error_rate == 0.01


def test_ttfb_is_accepted_from_yaml_and_from_the_command_line_alike():
    from_yaml = _scenario({"ttfb_ms": {"p95": 250}}).slo
    from_cli = SloSpec.from_dict({}).with_overrides(["ttfb_ms.p95=250", "max_error_rate=0.01"])
    assert from_yaml == from_cli
    assert [c.label for c in from_yaml.checks] == ["p95 TTFB"]


def test_a_ttfb_limit_judges_the_levels(tmp_path):
    """write_sample_run's first byte comes 5 ms before the first chunk (about 100·c ms): a 150 ms TTFB p95 holds 1 user, not 8."""
    run_dir = write_sample_run(tmp_path, slo={"ttfb_ms": {"p95": 150}, "max_error_rate": 0.5})
    analysis = analyze_run(run_dir)
    checks = {lv.load: [c for c in lv.checks if c.metric == "ttfb_ms"] for lv in analysis.levels}
    assert all(len(c) == 1 for c in checks.values())
    assert checks[1][0].verdict == "pass" and checks[8][0].verdict == "fail"
    assert analysis.capacity.binding == "ttfb_ms.p95"


@pytest.mark.parametrize(
    "slo, yaml_line, stored_line",
    [
        ({"ttfb_ms": {"p97": 3}}, "slo.ttfb_ms.p97: unknown percentile 'p97'", "slo.ttfb_ms.p97: unknown percentile 'p97'"),
        ({"latency_ms": {"p95": 3}}, "slo.latency_ms: unknown SLO metric", "slo.latency_ms: unknown SLO metric"),
        ({"e2e_ms": {"p95": 0}}, "slo.e2e_ms.p95: a latency limit must be > 0 ms", "slo.e2e_ms.p95: a latency limit"),
        ({"max_error_rate": 1.5}, "slo.max_error_rate: an error rate is a fraction", "slo.max_error_rate: an error"),
    ],
)
def test_one_clear_line_from_the_scenario_a_class_and_a_stored_slo(slo, yaml_line, stored_line):
    with pytest.raises(InputError) as yaml_err:
        _scenario(slo)
    with pytest.raises(InputError) as class_err:
        _scenario({}, classes=[{"name": "a", "slo": slo}])
    with pytest.raises(InputError) as stored_err:
        SloSpec.from_dict(slo)
    assert yaml_line in str(yaml_err.value)
    assert "workload.classes[0]." + yaml_line in str(class_err.value)
    assert stored_line in str(stored_err.value)
    assert all("\n" not in str(e.value) for e in (yaml_err, class_err, stored_err))
