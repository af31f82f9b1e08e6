"""Rerank and score end to end: ``target.api: rerank`` and ``score`` against the mock's routes.

The mock's truth (loadtest/mock/ranking.py, MODEL.md): a request of ``b`` documents of ``w``
words against a query of ``q`` words is one engine step whose prefill is ``P × b × (q + w)``;
with ``c`` closed-loop users the engine alternates batches and every request waits for the
others' and then its own, so e2e ≈ ``c × P × b × (q + w) + 2 × B``. Here ``P × b × (q + w)`` =
0.3125 × 4 × (4 + 12) = 20 ms and B = 2 ms: about 44 ms at 2 users, 84 at 4 and 164 at 8. The
SLO's 125 ms p95 is more than 20% from 84 and from 164: the capacity is 4. The throughput
ceiling is one batch per 20 ms: 200 documents (pairs) per second.
"""

from __future__ import annotations

import pandas as pd
import pytest

from loadtest.mock.process import MockServer
from support.runkit import loadtest, summary, write_scenario

MOCK = ["--decode-base-ms", "2", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0.3125"]
BATCH, QUERY, WORDS, COST_MS = 4, 4, 12, 20.0
WORKLOAD = {"prompt_tokens": {"mean": WORDS, "stddev": 0}, "query_tokens": {"mean": QUERY}, "batch_size": BATCH}
SLO = {"e2e_ms": {"p95": 125}, "max_error_rate": 0.05, "ttft_ms": None, "itl_ms": None}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A rerank sweep (2, 4, 8 users) and one saturated score level (8 users), on one mock."""
    tmp = tmp_path_factory.mktemp("ranking")
    out = {}
    with MockServer([*MOCK, "--request-log", str(tmp / "requests.log")]) as mock:
        # The score level runs its whole 3 s (min_level_duration_s): its throughput is asserted, and a
        # level decided early at ~2 s measures it over too short a window (see the score test).
        # A rerank level may run 10 s: 4 users' e2e p95 (~80-100 ms against 125) stayed undecided at 5 s
        # in a paired pass (its interval's top at 159 ms from a neighbour's stalls); more requests decide it.
        for api, levels, min_s, max_s in (("rerank", [2, 4, 8], None, 10), ("score", [8], 3, 5)):
            (tmp / api).mkdir()
            load = {"levels": levels, "level_duration_s": 3, "max_level_duration_s": max_s, "warmup_s": 0.5}
            if min_s:
                load["min_level_duration_s"] = min_s
            scenario = write_scenario(
                tmp / api, mock.base_url, target={"api": api, "model": "bge-reranker"}, workload=WORKLOAD,
                load=load, slo=SLO,
            )
            result = loadtest("run", str(scenario), "--out", str(tmp / api / "run"), timeout=240)
            assert result.returncode in (0, 1), result.stderr
            run = tmp / api / "run"
            out[api] = (summary(run), pd.read_parquet(run / "requests.parquet"), result.stdout + result.stderr)
    return out


def test_rerank_capacity_on_e2e_matches_the_mock(runs):
    s, frame, output = runs["rerank"]
    cap = s["capacity"]
    if cap["verdict"] != "host_contended":  # a busy shared host withholds the verdict (and says so)
        assert cap["concurrency"] == 4 and cap["first_failing"] == 8 and cap["binding"] == "e2e_ms.p95", cap["message"]
    for level in s["levels"]:  # e2e ≈ c × 20 ms + 2 steps' base (plus the client's own few ms)
        users, p50 = level["concurrency"], level["e2e_ms"]["p50"]
        assert users * COST_MS <= p50 < users * COST_MS * 1.2 + 10, (users, p50)
        assert level["items_per_s"] == pytest.approx(BATCH * level["requests_per_s"], rel=1e-3)
        # the mock's usage: every (query, document) pair's tokens
        assert level["input_tokens_per_s"] == pytest.approx(BATCH * (QUERY + WORDS) * level["requests_per_s"], rel=1e-3)
    measured = frame[~frame.warmup & frame.ok]
    assert (measured["items"] == BATCH).all() and (measured.prompt_tokens == BATCH * (QUERY + WORDS)).all()
    assert (measured.token_source == "usage").all() and measured.ttft_ms.isna().all()
    assert "items/s" in output and "e2e p95" in output and "TTFT p95 -" not in output  # the live lines


def test_score_pairs_per_second_reach_the_mock_ceiling(runs):
    s, frame, _ = runs["score"]
    (level,) = s["levels"]
    measured = frame[~frame.warmup & frame.ok]
    assert len(measured) > 20 and (measured["items"] == BATCH).all()
    assert (frame.error_kind.dropna() == "cancelled").all()  # nothing failed
    ceiling = 1000 / COST_MS * BATCH
    # At 8 users the engine is busy all the time. Low side 0.6, not 1: a loaded shared host makes the
    # mock's steps late. High side 1.1: answers count in the window they *ended* in, as the client read
    # them, so a client stall of ~100 ms just before the window lets about 5 answers (20 pairs) the
    # server finished earlier be read inside the 3 s window, +7% (seen at 1.07 on a 1.9 s window).
    assert 0.6 * ceiling < level["items_per_s"] < ceiling * 1.1, level["items_per_s"]
    assert 8 * COST_MS <= level["e2e_ms"]["p50"] < 8 * COST_MS * 1.2 + 10
