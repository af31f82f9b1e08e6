"""What autoscaling.yaml and the autoscaling paragraph say of the headroom, given --headroom and --scale-up-s.

From a user trial: after ``loadtest analyze RUN --headroom 0.3 --scale-up-s 60``, autoscaling.yaml read
"Headroom 30% (--headroom 30% (larger than the one derived from --scale-up-s))": brackets in brackets,
and the derived headroom (9.1%) never stated; and it still said "measure it and pass it as
--scale-up-s", which had been passed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from loadtest.analysis import analyze
from loadtest.analysis.autoscaling import AutoscalingOptions, resolve_headroom
from loadtest.analysis.slo import SloSpec
from loadtest.report.autoscaling_yaml import render_autoscaling_yaml
from loadtest.scrape.sources import replica_ids
from loadtest.scrape.store import UP
from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame

pytestmark = pytest.mark.unit


def _yaml(options: AutoscalingOptions) -> str:
    """autoscaling.yaml of a one-replica run (ITL = 10·c ms against 65: capacity 6), comments unwrapped."""
    plan = level_plan([2, 4, 6, 8], 10.0)
    rows = []
    for lv in plan:
        rows += closed_loop_rows(lv["index"], lv["concurrency"], lv["start_wall"], 10.0,
                                 itl_ms=10.0 * lv["concurrency"], warmup_s=1.0)
    run = run_dict(plan, warmup_s=1.0, slo={"itl_ms": {"p95": 65}})
    url = "http://127.0.0.1:9000/metrics"
    run["server_metrics"] = {"enabled": True, "url": url, "urls": [], "interval_s": 0.5, "signals": []}
    (rid,) = replica_ids([url])
    samples = [
        {"wall": t, "metric": metric, "labels": "{}", "value": value, "type": "gauge", "replica": rid}
        for lv in plan
        for t in np.arange(lv["start_wall"] + 0.25, lv["end_wall"], 0.5)
        for metric, value in (("vllm:num_requests_running", float(lv["concurrency"])),
                              ("vllm:num_requests_waiting", 0.0), (UP, 1.0))
    ]
    analysis = analyze(to_frame(rows), run, SloSpec.from_dict(run["scenario"]["slo"]),
                       server_samples=pd.DataFrame(samples), resamples=50, autoscaling=options)
    assert analysis.autoscaling.best is not None  # the premise: manifests, not the "no signal" note
    return render_autoscaling_yaml(analysis).replace("\n# ", " ")


def test_a_given_scale_up_time_is_not_asked_for_and_the_derived_headroom_is_stated():
    text = _yaml(AutoscalingOptions(headroom=0.3, scale_up_s=60))
    assert ("Headroom 30% (--headroom 30%, larger than the 9.1% derived from --scale-up-s 60: traffic growing "
            "10%/min grows ×1.10 while a new replica starts).") in text, text
    assert "measure it and pass it as --scale-up-s" not in text
    assert "was given as 60 s (--scale-up-s)" in text
    assert "derived from --scale-up-s))" not in text


def test_without_a_scale_up_time_the_advice_to_measure_it_stays():
    text = _yaml(AutoscalingOptions(headroom=0.3))
    assert "Headroom 30% (--headroom 30%)." in text
    assert "measure it and pass it as --scale-up-s to derive the headroom" in text


@pytest.mark.parametrize("options", [
    AutoscalingOptions(headroom=0.3, scale_up_s=60),
    AutoscalingOptions(headroom=0.1, scale_up_s=180),
    AutoscalingOptions(scale_up_s=60),
    AutoscalingOptions(headroom=0.3),
    AutoscalingOptions(),
])
def test_the_headroom_source_has_no_brackets_of_its_own(options):
    """It is printed inside "Headroom 30% (…)"."""
    _, source = resolve_headroom(options)
    assert "(" not in source and ")" not in source, source


def test_a_derived_headroom_that_wins_says_it_overruled_the_given_one():
    headroom, source = resolve_headroom(AutoscalingOptions(headroom=0.1, scale_up_s=180))
    assert headroom == pytest.approx(1 - 1.1 ** -3)
    assert source.startswith("derived from --scale-up-s 180: a new replica takes 180 s to serve")
    assert source.endswith("; larger than --headroom 10%"), source
