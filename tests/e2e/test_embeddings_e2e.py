"""Embeddings end to end: ``target.api: embeddings`` against the mock's ``/v1/embeddings``.

The mock's truth (loadtest/mock/embeddings.py, MODEL.md): a request of ``b`` inputs of ``w``
words is one engine step whose prefill is ``P × b × w``; with ``c`` closed-loop users the
engine alternates batches and every request waits for the others' and then its own, so
e2e ≈ ``c × P × b × w + 2 × B``. Here ``P × b × w`` = 0.3125 × 4 × 16 = 20 ms and B = 2 ms:
about 24 ms at 1 user (one step of its own, 22 ms), 44 at 2, 84 at 4 and 164 at 8. The SLO's
125 ms p95 is more than 20% from 84 and from 164: the capacity is 4. The throughput ceiling is
one batch per 20 ms: 50 requests/s, 200 items/s, 3200 input tokens/s.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest

from loadtest.mock.process import MockServer
from support.runkit import loadtest, summary, write_scenario

MOCK = ["--decode-base-ms", "2", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0.3125"]
BATCH, WORDS, COST_MS = 4, 16, 20.0


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("emb")
    with MockServer(MOCK) as mock:
        scenario = write_scenario(
            tmp, mock.base_url,
            target={"api": "embeddings", "model": "embed-model"},
            workload={"prompt_tokens": {"mean": WORDS, "stddev": 0}, "batch_size": BATCH},
            load={"levels": [2, 4, 8], "level_duration_s": 3, "max_level_duration_s": 5, "warmup_s": 0.5},
            slo={"e2e_ms": {"p95": 125}, "max_error_rate": 0.05, "ttft_ms": None, "itl_ms": None},
        )
        result = loadtest("run", str(scenario), "--out", str(tmp / "run"), timeout=240)
    assert result.returncode == 0, result.stderr
    return tmp / "run", summary(tmp / "run"), pd.read_parquet(tmp / "run" / "requests.parquet"), result.stdout


def test_capacity_on_e2e_matches_the_mock(sweep):
    _, s, _, _ = sweep
    cap = s["capacity"]
    if cap["verdict"] != "host_contended":  # a busy shared host withholds the verdict (and says so)
        assert cap["concurrency"] == 4 and cap["first_failing"] == 8 and cap["binding"] == "e2e_ms.p95"
    by_users = {lv["concurrency"]: lv for lv in s["levels"]}
    for users in (2, 4, 8):  # e2e ≈ c × 20 ms + 2 steps' base (plus the client's own few ms)
        p50 = by_users[users]["e2e_ms"]["p50"]
        assert users * COST_MS <= p50 < users * COST_MS * 1.2 + 10, (users, p50)


def test_throughput_is_input_tokens_and_items(sweep):
    _, s, frame, _ = sweep
    measured = frame[~frame.warmup & frame.ok]
    assert (measured["items"] == BATCH).all() and (measured.prompt_tokens == BATCH * WORDS).all()
    assert measured.ttft_ms.isna().all() and (measured.chunk_ms.map(len) == 0).all()
    assert (frame.error_kind.dropna() == "cancelled").all()  # nothing failed; "empty" never applies
    for level in s["levels"]:
        assert level["items_per_s"] == pytest.approx(BATCH * level["requests_per_s"], rel=1e-3)
        assert level["input_tokens_per_s"] == pytest.approx(BATCH * WORDS * level["requests_per_s"], rel=1e-3)
        assert level["items_per_s"] < 1000 / COST_MS * BATCH * 1.05  # never above the mock's ceiling
    saturated = max(s["levels"], key=lambda lv: lv["concurrency"])
    # at 8 users the engine is busy all the time (0.6, not 1: a loaded shared host makes the mock's steps late)
    assert saturated["items_per_s"] > 0.6 * 1000 / COST_MS * BATCH
    cap = s["capacity"]
    if cap["concurrency"] is not None:  # the capacity's throughput is its level's
        at = next(lv for lv in s["levels"] if lv["concurrency"] == cap["concurrency"])
        assert cap["items_per_s"] == pytest.approx(at["items_per_s"]) and cap["input_tokens_per_s"] > 0


def test_report_leaves_out_the_streaming_plots_and_says_why(sweep):
    run, _, _, stdout = sweep
    html = (run / "report.html").read_text()
    assert "Not streamed:" in html and "items/s" in html
    assert "Latency against throughput" not in html and "Distributions" not in html
    wide = loadtest("analyze", str(run), env={**os.environ, "COLUMNS": "200"})  # a narrow pipe would squeeze headers
    assert "items/s" in wide.stdout and "end-to-end latency" in wide.stdout and "TTFT" not in wide.stdout.split("\n")[2]


def test_reanalysis_with_another_e2e_limit_moves_the_capacity(sweep):
    run, _, _, _ = sweep
    result = loadtest("analyze", str(run), "--slo", "e2e_ms.p95=250")  # 164 ms at 8: every level holds
    assert result.returncode == 0, result.stderr
    cap = summary(run)["capacity"]
    if cap["verdict"] != "host_contended":  # a busy shared host withholds the verdict (and says so)
        assert cap["verdict"] == "at_least" and cap["concurrency"] == 8, cap["message"]
    loadtest("analyze", str(run))  # back to the run's own SLO for the other tests
