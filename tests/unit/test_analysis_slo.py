"""SLO parsing: the YAML block, CLI overrides, and one clear line for every bad input."""

from __future__ import annotations

import pytest

from loadtest.analysis.slo import SloCheck, SloSpec
from loadtest.errors import InputError

YAML_BLOCK = {"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 50}, "max_error_rate": 0.01}


def test_from_dict_reads_checks_and_error_budget():
    spec = SloSpec.from_dict(YAML_BLOCK)
    assert [c.name for c in spec.checks] == ["ttft_ms.p95", "itl_ms.p95"]
    assert spec.checks[0] == SloCheck("ttft_ms", "p95", 500.0)
    assert spec.max_error_rate == 0.01
    assert spec.to_dict() == {"ttft_ms": {"p95": 500.0}, "itl_ms": {"p95": 50.0}, "max_error_rate": 0.01}


def test_from_dict_empty_and_nulls():
    assert SloSpec.from_dict(None).is_empty
    assert SloSpec.from_dict({}).is_empty
    spec = SloSpec.from_dict({"ttft_ms": None, "itl_ms": {"p95": None, "p99": 80}, "max_error_rate": None})
    assert [c.name for c in spec.checks] == ["itl_ms.p99"]
    assert spec.max_error_rate is None


def test_overrides_replace_add_and_remove():
    spec = SloSpec.from_dict(YAML_BLOCK).with_overrides(
        ["itl_ms.p95=40", "e2e_ms.p99=20000", "max_error_rate=0.05", "ttft_ms.p95=off"]
    )
    assert spec.to_dict() == {"itl_ms": {"p95": 40.0}, "e2e_ms": {"p99": 20000.0}, "max_error_rate": 0.05}


def test_tightest_limit_across_percentiles_and_metrics():
    spec = SloSpec.from_dict({"itl_ms": {"p95": 50, "p99": 80}, "tpot_ms": {"p50": 30}})
    assert spec.tightest("itl_ms") == 50
    assert spec.tightest("itl_ms", "tpot_ms") == 30
    assert spec.tightest("e2e_ms") is None


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("itl_ms.p95", "expected METRIC.PERCENTILE=LIMIT"),
        ("itl.p95=40", "unknown metric 'itl'"),
        ("itl_ms.p97=40", "unknown percentile 'p97'"),
        ("itl_ms.p95=fast", "expected a number"),
        ("itl_ms.p95=-3", "must be > 0"),
        ("itl_ms.p95=nan", "finite"),
        ("max_error_rate=2", "between 0 and 1"),
        ("itl_ms=40", "expected METRIC.PERCENTILE=LIMIT"),
    ],
)
def test_bad_override_is_one_clear_line(override, fragment):
    with pytest.raises(InputError) as info:
        SloSpec.from_dict(YAML_BLOCK).with_overrides([override])
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message
    assert override.split("=")[0] in message


@pytest.mark.parametrize(
    "block, fragment",
    [
        ({"latency": {"p95": 3}}, "slo.latency: unknown SLO metric"),
        ({"ttft_ms": 500}, "slo.ttft_ms: expected a mapping"),
        ({"ttft_ms": {"p95": "soon"}}, "slo.ttft_ms.p95: expected a number"),
        ({"max_error_rate": -0.1}, "slo.max_error_rate"),
    ],
)
def test_bad_yaml_block_names_the_path(block, fragment):
    with pytest.raises(InputError, match=fragment.replace(".", r"\.")):
        SloSpec.from_dict(block)
