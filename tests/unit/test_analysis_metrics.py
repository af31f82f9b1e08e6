"""Per-level metrics on small synthetic runs whose answers are known by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from loadtest.analysis import SloSpec, analyze
from loadtest.analysis.columns import flatten_list
from loadtest.quantiles import quantile_sorted
from support.synthetic import T0, failed_row, level_plan, request_row, run_dict, to_frame

NO_SLO = SloSpec()


def one_level(rows, *, seconds=60.0, warmup_s=0.0, slo=NO_SLO, concurrency=1):
    levels = level_plan([concurrency], seconds)
    return analyze(to_frame(rows), run_dict(levels, warmup_s=warmup_s), slo)


def test_ttft_percentiles_per_level():
    rows = [
        request_row(request_id=f"r{i}", start_wall=T0 + 0.5 * i, chunk_ms=[float(ttft), ttft + 20.0])
        for i, ttft in enumerate(range(1, 101))
    ]
    level = one_level(rows).levels[0]
    assert level.ttft_ms.n == 100
    assert level.ttft_ms.p50 == pytest.approx(50.5)
    assert level.ttft_ms.p95 == pytest.approx(95.05)
    assert level.ttft_ms.p99 == pytest.approx(99.01)
    assert level.ttft_ms.max == 100.0
    assert level.ttft_ms.mean == pytest.approx(50.5)


def test_multi_token_chunk_spreads_its_gap_over_its_tokens():
    row = request_row(start_wall=T0 + 1, chunk_ms=[100.0, 130.0, 190.0], chunk_tokens=[1, 3, 2], completion_tokens=6)
    level = one_level([row]).levels[0]
    # gap 30 ms over 3 tokens -> 10,10,10; gap 60 ms over 2 tokens -> 30,30; first chunk is TTFT
    assert level.itl_ms.n == 5
    assert level.itl_ms.mean == pytest.approx(18.0)
    assert level.itl_ms.p50 == pytest.approx(10.0)
    assert level.itl_ms.max == pytest.approx(30.0)
    # TPOT = (e2e - ttft) / (tokens - 1) = (191 - 100) / 5
    assert level.tpot_ms.p50 == pytest.approx(91.0 / 5)


def test_tpot_leaves_out_the_tokens_that_arrived_with_the_first_chunk():
    """Four tokens a chunk, 60 ms apart: 15 ms a token. The first chunk's four arrive at TTFT, so TPOT
    divides the decode time by the 12 tokens after it, and agrees with ITL; (tokens - 1) read 12.1 ms."""
    row = request_row(start_wall=T0 + 1, chunk_ms=[100.0, 160.0, 220.0, 280.0], chunk_tokens=[4, 4, 4, 4],
                      completion_tokens=16)
    level = one_level([row]).levels[0]
    assert level.itl_ms.p50 == pytest.approx(15.0)
    assert level.tpot_ms.n == 1 and level.tpot_ms.p50 == pytest.approx(181.0 / 12)
    # a first chunk of one token, then five a chunk (a server's stream interval): the usual (tokens - 1)
    row = request_row(start_wall=T0 + 1, chunk_ms=[100.0, 160.0, 220.0, 280.0], chunk_tokens=[1, 5, 5, 5],
                      completion_tokens=16)
    assert one_level([row]).levels[0].tpot_ms.p50 == pytest.approx(181.0 / 15)
    # every token in the one chunk: no decode time to divide, so no TPOT (not a TPOT of ~0)
    single = request_row(start_wall=T0 + 2, chunk_ms=[100.0], chunk_tokens=[4], completion_tokens=4)
    assert one_level([single]).levels[0].tpot_ms.n == 0


def test_zero_token_chunks_are_not_token_arrivals():
    row = request_row(start_wall=T0 + 1, chunk_ms=[100.0, 110.0, 140.0], chunk_tokens=[1, 0, 1])
    level = one_level([row]).levels[0]
    assert level.itl_ms.n == 1 and level.itl_ms.p50 == pytest.approx(40.0)


def test_missing_chunk_tokens_count_one_token_per_chunk():
    row = request_row(start_wall=T0 + 1, chunk_ms=[100.0, 120.0, 150.0], chunk_tokens=None)
    level = one_level([row]).levels[0]
    assert level.itl_ms.n == 2 and level.itl_ms.mean == pytest.approx(25.0)


def test_warmup_requests_are_excluded_from_ttft_and_errors():
    rows = [
        request_row(request_id="flagged", start_wall=T0 + 1, warmup=True, chunk_ms=[900.0, 920.0]),
        request_row(request_id="early", start_wall=T0 + 2, chunk_ms=[800.0, 820.0]),  # before the window
        failed_row(request_id="early-fail", start_wall=T0 + 3, warmup=True),
        request_row(request_id="measured", start_wall=T0 + 10, chunk_ms=[100.0, 120.0]),
    ]
    analysis = one_level(rows, warmup_s=5.0)
    level = analysis.levels[0]
    assert level.ttft_ms.n == 1 and level.ttft_ms.p50 == 100.0
    assert level.requests == 1 and level.errors == 0
    frame = analysis.requests.set_index("request_id")
    assert not frame.loc["flagged", "measured"] and not frame.loc["early", "measured"]
    assert frame.loc["measured", "measured"]


def test_itl_of_a_warmup_request_counts_once_its_chunks_arrive_in_the_window():
    # starts 0.1 s before the window opens; chunks every 50 ms for 0.5 s
    row = request_row(start_wall=T0 + 4.9, warmup=True, chunk_ms=[25.0 + 50.0 * i for i in range(11)])
    level = one_level([row], warmup_s=5.0).levels[0]
    # arrivals at T0+4.925 .. T0+5.425; the window opens at T0+5: 9 chunks arrive inside it and
    # each ends one gap, even the first (its predecessor arrived during warmup)
    assert level.itl_ms.n == 9
    assert level.ttft_ms.n == 0


def test_itl_goes_to_the_level_where_the_chunk_arrived_and_spillover_is_flagged():
    levels = level_plan([1, 2], 10.0)
    crossing = request_row(
        request_id="crossing", level=1, level_index=0, start_wall=T0 + 9.55,
        chunk_ms=[100.0 * i for i in range(1, 11)],  # arrivals +9.65 .. +10.55
    )
    inside = request_row(request_id="inside", level=2, level_index=1, start_wall=T0 + 12.0, chunk_ms=[50.0, 60.0])
    analysis = analyze(to_frame([crossing, inside]), run_dict(levels), NO_SLO)
    low, high = analysis.levels
    assert (low.concurrency, high.concurrency) == (1, 2)
    assert low.itl_ms.n == 3  # gaps ending at +9.75, +9.85, +9.95
    assert high.itl_ms.n == 6 + 1  # gaps ending at +10.05 .. +10.55, plus the other request's gap
    assert low.ttft_ms.n == 1 and high.ttft_ms.n == 1  # TTFT stays where the request started
    frame = analysis.requests.set_index("request_id")
    assert frame.loc["crossing", "spillover"] and not frame.loc["crossing", "complete"]
    # a request that outlives its level keeps its e2e and TPOT at the level it started in:
    # the longest requests are the likeliest to spill over, so dropping them would cut the tail
    assert low.spillover == 1 and low.e2e_ms.n == 1 and low.tpot_ms.n == 1
    assert high.e2e_ms.n == 1
    # tokens are credited where they streamed: 4 chunks in level 0, 6 + 2 in level 1
    assert low.output_tokens_per_s == pytest.approx(4 / 10.0)
    assert high.output_tokens_per_s == pytest.approx(8 / 10.0)


def test_timeouts_count_against_ttft_instead_of_vanishing():
    ok = [request_row(request_id=f"ok{i}", start_wall=T0 + 0.3 * i, chunk_ms=[100.0, 120.0]) for i in range(94)]
    timeouts = [failed_row("timeout", request_id=f"to{i}", start_wall=T0 + 30 + 0.3 * i, e2e_ms=5000.0)
                for i in range(6)]
    slo = SloSpec.from_dict({"ttft_ms": {"p95": 500}})
    baseline = one_level(ok, slo=slo).levels[0]
    level = one_level(ok + timeouts, slo=slo).levels[0]
    assert baseline.ttft_ms.p95 == 100.0 and baseline.check("ttft_ms.p95").verdict == "pass"
    assert level.ttft_ms.n == 100 and level.ttft_ms.n_failed == 6
    assert math.isinf(level.ttft_ms.p95)  # 6% failed: the p95 request never got a token
    assert level.ttft_ms.max == 100.0  # mean/max describe observed values only
    assert level.check("ttft_ms.p95").verdict != "pass"  # 6 of 100 is not yet a certain failure
    assert level.errors == 6 and level.error_rate == pytest.approx(0.06)
    assert level.errors_by_kind == {"timeout": 6}
    # 20% failures spread over the window is a certain failure; intervals resample blocks of
    # time, so the same failures packed into one burst would (rightly) be less certain.
    many = [failed_row("timeout", request_id=f"to{i}", start_wall=T0 + 1.2 * i + 0.1) for i in range(20)]
    assert one_level(ok[:80] + many, slo=slo).levels[0].check("ttft_ms.p95").verdict == "fail"


def test_a_broken_stream_adds_one_infinite_itl_sample():
    broken = request_row(start_wall=T0 + 1, chunk_ms=[100.0, 120.0, 140.0], e2e_ms=10_000.0, ok=False,
                         error_kind="timeout", error="stalled")
    level = one_level([broken]).levels[0]
    assert level.itl_ms.n == 3 and level.itl_ms.n_failed == 1
    assert level.ttft_ms.p50 == 100.0  # it did produce a first token
    assert math.isinf(level.e2e_ms.p50)  # but it did not complete


def test_requests_cancelled_by_the_harness_are_censored_not_failed():
    ok = [request_row(request_id=f"ok{i}", start_wall=T0 + 0.5 * i, chunk_ms=[100.0, 120.0]) for i in range(20)]
    # users stopped at the level change: one got its first token, one had not
    cut_late = request_row(request_id="cut-late", start_wall=T0 + 59.5, chunk_ms=[100.0, 150.0, 200.0],
                           e2e_ms=500.0, ok=False, error_kind="cancelled",
                           error="the run stopped while the request was in flight", completion_tokens=0,
                           token_source="chunks")
    cut_early = failed_row("cancelled", request_id="cut-early", start_wall=T0 + 59.9, e2e_ms=100.0, status=200)
    slo = SloSpec.from_dict({"ttft_ms": {"p95": 500}, "max_error_rate": 0.01})
    analysis = one_level(ok + [cut_late, cut_early], slo=slo)
    level = analysis.levels[0]
    assert level.requests == 20 and level.errors == 0 and level.error_rate == 0.0
    assert level.errors_by_kind == {} and level.cancelled == 2
    assert level.ttft_ms.n == 21 and level.ttft_ms.n_failed == 0  # the observed TTFT is kept, no +inf
    assert level.itl_ms.n == 20 + 2 and level.itl_ms.n_failed == 0  # its real gaps count
    assert level.e2e_ms.n == 20  # cut before the e2e limit could be missed: left out
    assert level.status == "pass"
    frame = analysis.requests.set_index("request_id")
    assert frame.loc["cut-late", "spillover"] and frame.loc["cut-early", "spillover"]
    assert analysis.token_source == {"usage": 20}  # counted over successful requests
    # its 3 streamed chunks still count as output, despite completion_tokens = 0
    assert level.output_tokens_per_s == pytest.approx((20 * 2 + 3) / 60.0)


def test_a_request_cut_after_waiting_past_the_limit_is_a_miss_not_a_lost_sample():
    """The slow tail survives the end of a probe: a request still queued when it was cut counts."""
    ok = [request_row(request_id=f"ok{i}", start_wall=T0 + 0.5 * i, chunk_ms=[100.0, 120.0]) for i in range(100)]
    queued = [failed_row("cancelled", request_id=f"q{i}", start_wall=T0 + 50 + i, e2e_ms=2500.0, status=200)
              for i in range(8)]
    slo = SloSpec.from_dict({"ttft_ms": {"p95": 500}, "e2e_ms": {"p95": 2000}})
    level = one_level(ok + queued, slo=slo).levels[0]
    assert level.requests == 100 and level.errors == 0  # censored, not the server's failure
    assert level.ttft_ms.n == 108 and level.ttft_ms.n_failed == 8  # waited 2.5 s > 500 ms: certain misses
    assert level.e2e_ms.n == 108 and level.e2e_ms.n_failed == 8
    assert math.isinf(level.ttft_ms.p95)
    assert level.check("ttft_ms.p95").verdict != "pass"
    without_slo = one_level(ok + queued).levels[0]
    assert without_slo.ttft_ms.n == 100  # nothing judged on TTFT: a cut request is left out


def _errors(n_ok: int, n_failed: int, kind: str = "http_5xx") -> list[dict]:
    rows = [request_row(request_id=f"ok{i}", start_wall=T0 + 0.1 * i, chunk_ms=[50.0, 60.0]) for i in range(n_ok)]
    rows += [failed_row(kind, request_id=f"f{i}", start_wall=T0 + 0.1 * (n_ok + i), e2e_ms=20.0,
                        status=500) for i in range(n_failed)]
    return rows


@pytest.mark.parametrize(
    "n_ok, n_failed, verdict",
    [
        (200, 0, "pass"),
        (199, 1, "pass"),  # 0.5% <= 1%
        (170, 30, "fail"),  # 15%, Wilson lower bound ~10.7% > 1%
        (98, 2, "uncertain"),  # 2% > 1% but Wilson lower bound ~0.55% < 1%
    ],
)
def test_error_rate_verdict(n_ok, n_failed, verdict):
    slo = SloSpec.from_dict({"max_error_rate": 0.01})
    level = one_level(_errors(n_ok, n_failed), slo=slo).levels[0]
    check = level.check("error_rate")
    assert check.verdict == verdict
    assert check.n == n_ok + n_failed
    assert check.value == pytest.approx(n_failed / (n_ok + n_failed))
    assert check.ci[0] <= check.value <= check.ci[1]
    assert level.status == verdict


def test_throughput_goodput_and_tpot():
    # 20 requests in a 10 s window, 5 tokens each; half have a TTFT above the 150 ms limit
    rows = []
    for i in range(20):
        ttft = 100.0 if i % 2 == 0 else 200.0
        rows.append(request_row(request_id=f"r{i}", start_wall=T0 + 0.4 * i,
                                chunk_ms=[ttft + 25.0 * k for k in range(5)]))
    slo = SloSpec.from_dict({"ttft_ms": {"p95": 150, "p50": 300}})
    level = one_level(rows, seconds=10.0, slo=slo).levels[0]
    assert level.requests_per_s == pytest.approx(2.0)
    assert level.output_tokens_per_s == pytest.approx(10.0)
    assert level.goodput_rps == pytest.approx(1.0)  # held to the tightest TTFT limit (150 ms)
    assert level.tpot_ms.p50 == pytest.approx((100.0 + 1.0) / 4)


def test_reported_completion_tokens_scale_tokens_per_second():
    # the server reported 10 tokens for 5 chunks (one-per-chunk estimate was wrong)
    rows = [request_row(request_id=f"r{i}", start_wall=T0 + i, completion_tokens=10) for i in range(10)]
    level = one_level(rows, seconds=10.0).levels[0]
    assert level.output_tokens_per_s == pytest.approx(10.0)


def test_too_short_levels_and_spillover_are_warned():
    rows = [request_row(request_id=f"r{i}", start_wall=T0 + 2 * i, chunk_ms=[100.0, 5000.0]) for i in range(5)]
    judged = one_level(rows, seconds=10.0, slo=SloSpec.from_dict({"e2e_ms": {"p95": 20000}}))
    assert any("levels are too short for the output length" in w for w in judged.warnings)
    # with no e2e or TPOT objective nothing judged depends on whole requests: no warning
    assert not any("too short" in w for w in one_level(rows, seconds=10.0).warnings)


def test_levels_listed_out_of_order_and_refine_levels_are_sorted():
    levels = level_plan([1, 4, 2], 10.0)
    levels[2]["refine"] = True
    rows = [request_row(request_id=f"l{lv['index']}-{i}", level=lv["concurrency"], level_index=lv["index"],
                        start_wall=lv["start_wall"] + i) for lv in levels for i in range(3)]
    run = run_dict(list(reversed(levels)))
    analysis = analyze(to_frame(rows), run, NO_SLO)
    assert [lv.concurrency for lv in analysis.levels] == [1, 2, 4]
    assert [lv.refine for lv in analysis.levels] == [False, True, False]
    assert all(lv.requests == 3 for lv in analysis.levels)


def test_missing_level_end_is_inferred_from_the_run():
    levels = level_plan([1, 2], 10.0)
    levels[1]["end_wall"] = None  # killed mid-level
    rows = [request_row(request_id=f"r{i}", level=2, level_index=1, start_wall=T0 + 10 + i) for i in range(3)]
    run = run_dict(levels)
    run["ended_wall"] = T0 + 15
    run["complete"] = False
    analysis = analyze(to_frame(rows), run, NO_SLO)
    assert analysis.level(2).requests == 3
    assert analysis.level(2).window_s == pytest.approx(5.0)
    assert any("did not complete" in w for w in analysis.warnings)


def test_flatten_list_handles_nulls_and_arrow_dtype():
    frame = to_frame([request_row(chunk_ms=[1.0, 2.0]), failed_row(chunk_ms=None), request_row(chunk_ms=[3.0])])
    values, lengths = flatten_list(frame, "chunk_ms")
    np.testing.assert_array_equal(values, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(lengths, [2, 0, 1])
    arrow = frame.astype({"chunk_ms": pd.ArrowDtype(__import__("pyarrow").list_(__import__("pyarrow").float64()))})
    values2, lengths2 = flatten_list(arrow, "chunk_ms")
    np.testing.assert_array_equal(values2, values)
    np.testing.assert_array_equal(lengths2, lengths)


# -- the vectorized ITL equals a plain per-request loop -------------------------------------------


def _reference_itl(rows, windows):
    """Per-level ITL samples computed the obvious way, one request at a time."""
    out = {w["index"]: [] for w in windows}

    def window_of(t):
        for w in windows:
            if w["start_wall"] + 1.0 <= t < w["end_wall"]:  # warmup_s = 1
                return w["index"]
        return None

    for row in rows:
        kept = [(t, k) for t, k in zip(row["chunk_ms"], row["chunk_tokens"], strict=True) if k > 0]
        for (t_prev, _), (t, k) in zip(kept, kept[1:], strict=False):
            level = window_of(row["start_wall"] + t / 1000.0)
            if level is not None:
                out[level] += [(t - t_prev) / k] * k
        if not row["ok"] and kept:
            level = window_of(row["start_wall"] + row["e2e_ms"] / 1000.0)
            if level is not None:
                out[level].append(math.inf)
    return out


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_request = st.fixed_dictionaries(
    {
        "start": st.floats(0.0, 29.0),
        "gaps": st.lists(st.floats(0.0, 400.0), min_size=0, max_size=12),
        "tokens": st.lists(st.integers(0, 4), min_size=13, max_size=13),
        "ok": st.booleans(),
        "level_index": st.integers(0, 2),
    }
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_request, min_size=1, max_size=25))
def test_vectorized_itl_equals_a_per_request_loop(requests):
    levels = level_plan([1, 2, 4], 10.0)
    rows = []
    for i, r in enumerate(requests):
        chunk_ms = list(np.cumsum([50.0] + r["gaps"])) if r["gaps"] or r["ok"] else []
        tokens = r["tokens"][: len(chunk_ms)]
        rows.append(request_row(
            request_id=f"r{i}", start_wall=T0 + r["start"], level=[1, 2, 4][r["level_index"]],
            level_index=r["level_index"], chunk_ms=[float(x) for x in chunk_ms], chunk_tokens=tokens,
            e2e_ms=(chunk_ms[-1] + 500.0) if chunk_ms else 100.0, ok=r["ok"],
            error_kind=None if r["ok"] else "disconnect",
        ))
    analysis = analyze(to_frame(rows), run_dict(levels, warmup_s=1.0), NO_SLO)
    expected = _reference_itl(rows, levels)
    for level in analysis.levels:
        want = sorted(expected[level.index])
        assert level.itl_ms.n == len(want)
        assert level.itl_ms.n_failed == sum(math.isinf(x) for x in want)
        finite = [x for x in want if math.isfinite(x)]
        if finite:
            assert level.itl_ms.max == pytest.approx(max(finite))
            assert level.itl_ms.mean == pytest.approx(float(np.mean(finite)))
        for pct, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            expected_q = quantile_sorted(np.array(want), q)
            got = level.itl_ms.percentile(pct)
            assert (math.isnan(got) and math.isnan(expected_q)) or got == pytest.approx(expected_q)


def test_a_request_started_after_the_last_level_is_no_orphan_and_no_warning():
    """Workers tag requests they start after the run's last level with level index -1."""
    levels = level_plan([1], 10.0)
    rows = [request_row(request_id=f"r{i}", start_wall=T0 + i) for i in range(5)]
    rows.append(request_row(request_id="late", level_index=-1, start_wall=T0 + 10.5))
    analysis = analyze(to_frame(rows), run_dict(levels), NO_SLO)
    assert analysis.levels[0].requests == 5
    assert not any("level index" in w or "name a level" in w for w in analysis.warnings), analysis.warnings


def test_whole_request_warnings_follow_the_class_slos_and_the_hold():
    """A summarize class judged on e2e with 4 requests at a level got no warning (the top-level SLO
    judged no e2e), and a held level's spillover was said to be "served under the next level's
    load" though the hold kept its load until they ended."""
    plan = level_plan([4], 10.0)
    rows = []
    for i in range(20):  # chat: short answers, many per level
        rows.append(request_row(request_id=f"c{i}", start_wall=T0 + 0.45 * i, level=4) | {"class": "chat"})
    for i in range(4):  # summarize: 4 long answers, each ending after the window (in the hold)
        rows.append(request_row(request_id=f"s{i}", start_wall=T0 + 2 * i + 1, level=4,
                                chunk_ms=[100.0, 9000.0]) | {"class": "summarize"})
    classes = [{"name": "chat", "weight": 3, "slo": {"ttft_ms": {"p50": 300}}},
               {"name": "summarize", "weight": 1, "slo": {"e2e_ms": {"p50": 15000}}}]
    run = run_dict(plan, slo={"max_error_rate": 0.5})
    run["scenario"]["workload"] = {"classes": classes}
    slo = SloSpec.from_dict({"max_error_rate": 0.5})
    unheld = analyze(to_frame(rows), run, slo).warnings
    assert any(w.startswith("the summarize class: levels are too short") and "at concurrency 4 (0)" in w for w in unheld)
    assert any(w.startswith("the summarize class: many requests outlived their level") for w in unheld)
    assert not any(w.startswith("the chat class:") for w in unheld)  # its SLO judges no whole request
    plan[0]["hold"] = {"start_wall": plan[0]["end_wall"], "end_wall": plan[0]["end_wall"] + 9.0, "held_s": 9.0,
                       "waited_for": 4, "ended": "drained", "censored": 0, "cap_s": 30.0}
    held = analyze(to_frame(rows), run, slo).warnings
    # held: its 4 measured requests all ended at its load; still too few, and no spillover warning
    assert any(w.startswith("the summarize class: levels are too short") and "at concurrency 4 (4)" in w for w in held)
    assert not any("outlived their level" in w for w in held)


def test_records_without_a_class_make_no_class_of_their_own():
    """An open loop's dropped arrivals were recorded without a class; the frame's string column read
    them as NaN, which became a class "nan" judged by the top-level SLO, and the terminal's class table
    died on it (``unable to render float``: a trial's two-class run exited 1 with a traceback)."""
    from rich.console import Console

    from loadtest.report.terminal import build_class_table

    plan = level_plan([4], 10.0)
    rows = [request_row(request_id=f"c{i}", start_wall=T0 + 0.45 * i, level=4) | {"class": "chat"} for i in range(20)]
    rows += [request_row(request_id=f"s{i}", start_wall=T0 + 0.5 * i, level=4) | {"class": "summarize"} for i in range(8)]
    rows += [failed_row("dropped", e2e_ms=0.0, request_id=f"d{i}", start_wall=T0 + 1 + i, level=4) | {"class": None}
             for i in range(3)]
    run = run_dict(plan, slo={"max_error_rate": 0.5})
    run["scenario"]["workload"] = {"classes": [{"name": "chat", "weight": 3}, {"name": "summarize", "weight": 1}]}
    result = analyze(to_frame(rows), run, SloSpec.from_dict({"max_error_rate": 0.5}))
    assert set(result.levels[0].classes) == {"chat", "summarize"}
    assert set(result.capacity.classes) == {"chat", "summarize"}
    assert result.levels[0].errors == 3  # the drops still count in the whole run
    assert not any("nan" in w for w in result.warnings)
    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    console.print(build_class_table(result))
    assert "summarize" in console.export_text()
