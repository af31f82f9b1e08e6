"""The prompt length the scenario asked for, held against the one the server counted.

A trial's scenario said ``prompt_tokens: {mean: 64}``; llama-server counted a mean of 132
(``usage.prompt_tokens``: its chat template added about 56 tokens), and no output compared the
two. The records here are synthetic (tests/support/synthetic.py), analyzed by the real pipeline.
"""

from __future__ import annotations

import re

from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame

from loadtest.analysis import SloSpec, analyze
from loadtest.report.sections import header
from loadtest.report.summary import summary_dict

SLO = {"ttft_ms": {"p95": 1000}, "max_error_rate": 0.01}


def _analysis(counted: int | None, asked: int = 64, workload: dict | None = None):
    plan = level_plan([1, 2], 6.0)
    rows = []
    for lv in plan:
        rows += closed_loop_rows(lv["index"], lv["concurrency"], lv["start_wall"], 6.0, seed=lv["index"])
    for row in rows:
        row["prompt_tokens_asked"] = asked
        row["prompt_tokens"] = counted if counted is not None else asked
        row["prompt_token_source"] = "usage" if counted is not None else "estimate"
    run = run_dict(plan, slo=SLO)
    run["scenario"]["workload"] = {"prompt_tokens": {"mean": asked, "stddev": 0}, "dataset": None, "classes": [],
                                   **(workload or {})}
    return analyze(to_frame(rows), run, SloSpec.from_dict(SLO), resamples=200)


def test_a_server_that_counts_twice_the_prompt_asked_for_is_named_in_a_warning_the_summary_and_the_report():
    analysis = _analysis(counted=132)
    summary = summary_dict(analysis)
    prompts = summary["prompt_tokens"]
    assert prompts["asked_mean"] == 64.0 and prompts["counted_mean"] == 132.0 and prompts["source"] == "usage"
    assert prompts["ratio"] == round(132 / 64, 3) and prompts["asked_source"] == "words" and prompts["comparable"]
    assert prompts["requests"] == int(analysis.requests["ok"].sum())
    warning = next(w for w in summary["warnings"] if w.startswith("prompt tokens:"))
    assert "counted a mean of 132.0 per request (usage.prompt_tokens) where the workload asked for 64.0" in warning
    assert "+106%" in warning and "chat template" in warning
    row = re.search(r"<th>Prompt tokens</th><td>([^<]*)<", header(analysis)).group(1)
    assert row == "64.0 asked (one-token words sent), 132.0 counted by the server (usage.prompt_tokens, +106%), " \
                  "mean per request", row


def test_a_count_close_to_the_asked_one_is_shown_but_not_warned_about():
    analysis = _analysis(counted=70)  # +9%: a chat template of a few tokens
    assert summary_dict(analysis)["prompt_tokens"]["counted_mean"] == 70.0
    assert not any(w.startswith("prompt tokens:") for w in analysis.warnings), analysis.warnings


def test_without_usage_the_figures_say_they_rest_on_the_estimate():
    analysis = _analysis(counted=None)
    prompts = summary_dict(analysis)["prompt_tokens"]
    assert prompts["source"] == "estimate" and prompts["counted_mean"] is None and prompts["ratio"] is None
    assert "the server reported no usage.prompt_tokens, so every prompt figure is this estimate" in header(analysis)


def test_a_datasets_words_are_no_token_count_and_are_not_warned_about():
    analysis = _analysis(counted=132, workload={"dataset": {"path": "rows.jsonl"}})
    assert summary_dict(analysis)["prompt_tokens"]["comparable"] is False
    assert not any(w.startswith("prompt tokens:") for w in analysis.warnings)


def test_records_of_a_run_before_the_column_give_no_comparison():
    plan = level_plan([1], 4.0)
    rows = closed_loop_rows(0, 1, plan[0]["start_wall"], 4.0)
    analysis = analyze(to_frame(rows), run_dict(plan, slo=SLO), SloSpec.from_dict(SLO), resamples=200)
    assert analysis.prompt_length is None and summary_dict(analysis)["prompt_tokens"] is None
