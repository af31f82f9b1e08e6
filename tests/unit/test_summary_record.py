"""summary.json is built against one definition of its keys (:mod:`loadtest.report.summary_record`)."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from loadtest.analysis import SloSpec, analyze, analyze_run
from loadtest.metric_registry import LATENCY_METRICS
from loadtest.report.summary import summary_dict
from loadtest.report.summary_record import LevelRecord, SummaryRecord, check_summary
from support.synthetic import SAMPLE_SLO, level_plan, run_dict, to_frame, write_sample_run


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return summary_dict(analyze_run(write_sample_run(tmp_path_factory.mktemp("run"), SAMPLE_SLO)))


def test_a_built_summary_matches_the_record_and_is_written_as_built(built):
    assert check_summary(built) is built  # validated, not rewritten: no figure changes on the way out
    assert set(built) == set(SummaryRecord.model_fields)
    assert set(built["levels"][0]) <= set(LevelRecord.model_fields)


def test_each_registry_latency_metric_is_a_level_key(built):
    assert set(LATENCY_METRICS) <= set(LevelRecord.model_fields)
    assert all(isinstance(built["levels"][0][key], dict) for key in LATENCY_METRICS)


def test_an_empty_run_matches_too():
    levels = level_plan([1, 2], 10.0)
    check_summary(summary_dict(analyze(to_frame([]), run_dict(levels, slo=SAMPLE_SLO), SloSpec.from_dict(SAMPLE_SLO))))


@pytest.mark.parametrize("mutate, where", [
    (lambda s: s.update(capacty=s["capacity"]), "capacty"),  # a key under a misspelt name
    (lambda s: s.pop("warnings"), "warnings"),  # a key dropped
    (lambda s: s["capacity"].update(concurrency=[4]), "capacity.concurrency"),  # a wrong kind
    (lambda s: s["levels"][0].update(ttft=s["levels"][0]["ttft_ms"]), "levels.0.ttft"),
])
def test_a_key_renamed_dropped_or_of_the_wrong_kind_is_refused(built, mutate, where):
    broken = copy.deepcopy(built)
    mutate(broken)
    with pytest.raises(ValidationError) as caught:
        check_summary(broken)
    assert where.split(".")[-1] in str(caught.value)  # pydantic's message names the key
