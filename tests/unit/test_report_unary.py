"""A unary run's outputs (embeddings, rerank, score) speak of what it measured, not of a chat stream.

An answer in one body has no first token, no token gaps and no output tokens: its throughput is
input tokens/s and items/s. The report's header read "At capacity 30.68 req/s · 0 output tok/s"
with an "ITL unit" fact, its per-level table showed "tok/s 0" with no input or items column, and
the terminal printed no ``cost:`` line (it keyed on the price per million output tokens, which a
unary run has none of) under a title that spoke of "ITL per token".
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from loadtest.analysis import SloSpec, analyze
from loadtest.report.html import render_html
from loadtest.report.sections import header, levels_table
from loadtest.report.terminal import print_summary
from support.synthetic import level_plan, request_row, run_dict, to_frame

ITEMS, PROMPT_TOKENS, LEVEL_S = 8, 64, 10.0


def _unary_run(api: str):
    """Levels of 2 and 4 users, each request 20 ms per user end to end, 8 inputs of 64 tokens in all."""
    plan = level_plan([2, 4], LEVEL_S)
    rows = []
    for lv in plan:
        users, e2e = lv["concurrency"], 20.0 * lv["concurrency"]
        for user in range(users):
            t = lv["start_wall"] + user * 0.001
            while t < lv["start_wall"] + LEVEL_S - 0.5:
                rows.append(request_row(
                    request_id=f"r-{len(rows)}", user=user, level=users, level_index=lv["index"], start_wall=t,
                    chunk_ms=[], ttft_ms=None, ttfb_ms=e2e - 0.5, e2e_ms=e2e, completion_tokens=0,
                    prompt_tokens=PROMPT_TOKENS, items=ITEMS))
                t += e2e / 1000.0 + 0.001
    run = run_dict(plan, slo={"e2e_ms": {"p95": 200}})
    run["target"]["api"] = api
    run["cost_options"] = {"usd_per_hour": 4, "peak_users": 40}
    return analyze(to_frame(rows), run, SloSpec.from_dict({"e2e_ms": {"p95": 200}}))


def _terminal(analysis) -> str:
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    print_summary(analysis, console)
    return console.export_text()


@pytest.mark.parametrize("api", ["embeddings", "rerank", "score"])
def test_a_unary_report_gives_input_tokens_and_items_not_output_tokens(api):
    analysis = _unary_run(api)
    assert analysis.capacity.concurrency == 4
    at = re.search(r"<th>At capacity</th><td>([^<]*)<", header(analysis)).group(1)
    cap = analysis.capacity
    assert at == (f"{cap.requests_per_s:.2f} req/s · {cap.input_tokens_per_s:.0f} input tok/s · "
                  f"{cap.items_per_s:.1f} items/s · goodput {cap.goodput_rps:.2f} req/s"), at
    assert cap.items_per_s == pytest.approx(ITEMS * cap.requests_per_s)
    assert "ITL unit" not in header(analysis)
    table = levels_table(analysis)
    assert "<th>input tok/s</th><th>items/s</th>" in table and "<th>tok/s</th>" not in table
    assert "TTFT" not in table and "ITL" not in table  # columns of dashes: nothing streamed to measure
    level = analysis.levels[-1]
    assert f"<td class='num'>{level.input_tokens_per_s:.0f}</td><td class='num'>{level.items_per_s:.1f}</td>" in table
    page = render_html(analysis)
    assert "output tok/s" not in page and "<th>$ per million input tokens</th>" in page


@pytest.mark.parametrize("api", ["embeddings", "rerank"])
def test_a_unary_run_prints_its_cost_and_no_itl_unit(api):
    text = _terminal(_unary_run(api))
    cost = next((line for line in text.splitlines() if line.startswith("cost: ")), text)
    assert re.match(r"cost: \$0\.\d+ per million input tokens, \$0\.\d+ per thousand requests on goodput "
                    r"\(\$4/h per replica\); 40 peak users: \d+ replicas", cost), cost
    assert "per level (latency in ms)" in text and "ITL per token" not in text
    assert "in tok/s" in text and "items/s" in text


def test_a_chat_run_still_speaks_of_its_stream():
    """The same run as chat (records without chunks: no output tokens): the stream's words stay."""
    analysis = _unary_run("chat")
    assert "output tok/s" in header(analysis) and "ITL unit" in header(analysis)
    assert "<th>tok/s</th>" in levels_table(analysis) and "items/s" not in levels_table(analysis)
    text = _terminal(analysis)
    assert "ITL per token" in text and "per million input tokens" not in text
