"""The hold (load/hold.py), the cut at its cap (analysis/hold_cut.py), and per-class looks honoured."""

from __future__ import annotations

import time

import pandas as pd

from loadtest.analysis import SloSpec, analyze
from loadtest.analysis.hold_cut import cut_at_hold_end
from support.synthetic import closed_loop_rows, level_plan, request_row, run_dict, to_frame
from loadtest.load.hold import HOLD_CAP_S, Hold, hold_cap_s, measured_running
from loadtest.load.levels import LevelSpan


def _in_flight(rows: list[dict]) -> pd.DataFrame:
    cols = ("level_index", "warmup", "start_wall", "schedule_lag_ms")
    return pd.DataFrame({c: [r.get(c) for r in rows] for c in cols})


def test_only_the_levels_measured_requests_are_waited_for():
    span = LevelSpan(index=3, concurrency=4, start_wall=100.0, end_wall=110.0)
    frame = _in_flight([
        {"level_index": 3, "warmup": False, "start_wall": 109.0},  # measured: waited for
        {"level_index": 3, "warmup": True, "start_wall": 100.5},  # warm-up: not measured
        {"level_index": 3, "warmup": False, "start_wall": 110.2},  # started in the hold
        {"level_index": 2, "warmup": False, "start_wall": 99.0},  # the previous level's
        # open loop: sent after the end, but scheduled before it (0.5 s late): measured
        {"level_index": 3, "warmup": False, "start_wall": 110.3, "schedule_lag_ms": 500.0},
    ])
    assert measured_running(frame, span) == 2
    assert measured_running(pd.DataFrame(), span) == 0


def test_the_cap_is_the_timeout_and_never_more_than_the_documented_cap():
    assert hold_cap_s(5.0) == 5.0
    assert hold_cap_s(600.0) == HOLD_CAP_S


def test_a_hold_ends_when_its_requests_finish_or_at_its_cap():
    span = LevelSpan(index=0, concurrency=2, start_wall=time.time() - 5, end_wall=time.time())
    running = [2]
    hold = Hold(span, lambda s: running[0], cap_s=30.0)
    assert not hold.over() and span.hold == {}
    running[0] = 0
    assert hold.over()
    assert span.hold["ended"] == "drained" and span.hold["waited_for"] == 2 and span.hold["censored"] == 0
    assert span.hold["end_wall"] >= span.hold["start_wall"] == span.end_wall

    capped = LevelSpan(index=1, concurrency=2, start_wall=time.time() - 5, end_wall=time.time())
    hold = Hold(capped, lambda s: 1, cap_s=0.05)
    assert not hold.over()
    time.sleep(0.06)
    assert hold.over()
    assert capped.hold["ended"] == "cap" and capped.hold["censored"] == 1 and capped.hold["cap_s"] == 0.05


def test_a_request_running_past_its_hold_is_cut_there_never_booked_at_the_next_load():
    """16 tokens at 100 ms each (TPOT 100) until the hold's cap, then 300 ms steps at the next level."""
    t0 = 1_764_000_000.0
    slow = [100.0 + 100.0 * i for i in range(10)] + [1000.0 + 300.0 * i for i in range(1, 7)]
    plan = level_plan([4, 8], 10.0, t0)
    plan[0]["hold"] = {"start_wall": t0 + 9.0, "end_wall": t0 + 10.0, "held_s": 1.0, "waited_for": 1,
                       "ended": "cap", "censored": 1, "cap_s": 1.0}
    cut_row = request_row(request_id="slow", start_wall=t0 + 9.05, chunk_ms=slow, level=4, level_index=0)
    plain = request_row(request_id="early", start_wall=t0 + 2.0, level=4, level_index=0)
    frame = to_frame([cut_row, plain])
    run = run_dict(plan, slo={"tpot_ms": {"p95": 137}})
    cut = cut_at_hold_end(frame, run)
    row = cut.set_index("request_id").loc["slow"]
    assert not row.ok and row.error_kind == "cancelled"
    assert abs(row.e2e_ms - 950.0) < 1e-3  # wall times are float64 seconds
    assert list(row.chunk_ms) == slow[:9] and len(row.chunk_tokens) == 9
    assert cut.set_index("request_id").loc["early"].ok  # ended within the hold: untouched
    analysis = analyze(frame, run, SloSpec.from_dict({"tpot_ms": {"p95": 137}}))
    tpot = analysis.requests.set_index("request_id").loc["slow", "tpot_ms"]
    # its TPOT so far (frame.py's rule for a cut stream: its wait since the first token over the tokens
    # after it), at its own level's load: about 100 ms, not the 180 ms its full e2e would give
    assert abs(tpot - (950.0 - slow[0]) / 8) < 1e-3
    uncut = analyze(frame, run_dict(level_plan([4, 8], 10.0, t0)), SloSpec.from_dict({"tpot_ms": {"p95": 137}}))
    assert uncut.requests.set_index("request_id").loc["slow", "tpot_ms"] > 170
    # without a hold in run.json (an older run) nothing changes
    del plan[0]["hold"]
    assert cut_at_hold_end(frame, run_dict(plan)) is frame



def test_a_request_sent_during_the_hold_is_not_cut_and_its_tokens_count_where_they_arrived():
    """Users keep the load during a hold; what they send then is measured nowhere, but streams on.

    Cutting it at the hold's end (as once) took the tokens it streamed into the next level's
    window away from that window's throughput, which counts every chunk that arrived in it.
    """
    t0 = 1_764_000_000.0
    plan = level_plan([4, 8], 10.0, t0)
    plan[0]["hold"] = {"start_wall": t0 + 10.0, "end_wall": t0 + 11.0, "held_s": 1.0, "waited_for": 1,
                       "ended": "cap", "censored": 1, "cap_s": 1.0}
    plan[1]["start_wall"], plan[1]["end_wall"] = t0 + 11.0, t0 + 21.0
    chunks = [100.0 * i for i in range(1, 31)]  # 30 tokens over 3 s: two of them after the hold
    measured = request_row(request_id="measured", start_wall=t0 + 9.5, chunk_ms=chunks, level=4, level_index=0)
    in_hold = request_row(request_id="in_hold", start_wall=t0 + 10.2, chunk_ms=chunks, level=4, level_index=0)
    frame = to_frame([measured, in_hold])
    run = run_dict(plan)
    cut = cut_at_hold_end(frame, run).set_index("request_id")
    assert cut.loc["measured"].error_kind == "cancelled"  # measured at 4 users: cut where its hold ended
    assert cut.loc["in_hold"].ok and len(cut.loc["in_hold"].chunk_ms) == 30  # untouched
    level_1 = {lv.index: lv for lv in analyze(frame, run, SloSpec.from_dict({})).levels}[1]
    # in_hold's chunks from t0 + 11.3 (level 1's window, after its warmup) on are level 1's tokens
    assert level_1.output_tokens_per_s > 0


CLASSES = [
    {"name": "chat", "weight": 1, "max_tokens": 4, "slo": {"itl_ms": {"p95": 191}}},
    {"name": "long", "weight": 1, "max_tokens": 16, "slo": {"tpot_ms": {"p95": 137}}},
]


def _two_class_run(long_tpot_ms: float, decision: dict | None):
    """Level 4 (index 1): chat far below its limit, long's TPOT near its own (jittered)."""
    plan = level_plan([2, 4], 20.0)
    rows = []
    for position, (c, itl_long) in enumerate(((2, 60.0), (4, long_tpot_ms))):
        start = plan[position]["start_wall"]
        for name, itl, chunks, seed in (("chat", 90.0, 4, 1), ("long", itl_long, 16, 2)):
            for row in closed_loop_rows(position, c, start, 20.0, ttft_ms=50.0, itl_ms=itl, chunks=chunks,
                                        jitter=0.04, seed=seed + 10 * position):
                row["class"] = name
                row["request_id"] = f"{name}-{row['request_id']}"
                rows.append(row)
    if decision is not None:
        plan[1]["decision"] = decision
    run = run_dict(plan, slo={"max_error_rate": 0.5})
    run["scenario"]["workload"] = {"classes": CLASSES}
    return to_frame(rows), run


def test_a_class_check_a_look_decided_is_honoured_and_so_is_the_class_verdict():
    frame, run = _two_class_run(132.0, None)
    slo = SloSpec.from_dict({"max_error_rate": 0.5})
    base = analyze(frame, run, slo)
    assert base.levels[1].status == "uncertain"  # the premise: long's TPOT straddles 137 on all the data
    assert base.levels[1].classes["long"].status == "uncertain"

    passed = {"verdict": "pass", "why": "every check passes", "check": None, "ended": "decided_after_extension",
              "ran_s": 20.0, "looks": 3, "extended": True}
    frame, run = _two_class_run(132.0, passed)
    decided = analyze(frame, run, slo)
    level = decided.levels[1]
    assert level.status == "pass" and level.classes["long"].status == "pass"
    assert decided.capacity.concurrency == 4 and decided.capacity.classes["long"].concurrency == 4

    failed = {**passed, "verdict": "fail", "check": "long.tpot_ms.p95", "why": "long class's p95 TPOT ..."}
    frame, run = _two_class_run(140.0, failed)
    assert analyze(frame, run, slo).levels[1].status in ("uncertain", "fail")
    level = analyze(frame, run, slo).levels[1]
    assert level.status == "fail" and level.classes["long"].status == "fail"
    (check,) = [c for c in level.checks if c.class_name == "long" and c.name == "tpot_ms.p95"]
    assert check.verdict == "fail"
    assert analyze(frame, run, slo).capacity.binding_class == "long"


def test_a_class_look_is_not_carried_to_another_slo():
    passed = {"verdict": "pass", "why": "every check passes", "check": None, "ended": "decided",
              "ran_s": 20.0, "looks": 2, "extended": False}
    frame, run = _two_class_run(132.0, passed)
    from loadtest.analysis.classes import class_slos

    # a re-analysis with a class limit of its own (a --slo override): the look judged another SLO
    top, slos = class_slos(run, SloSpec.from_dict({"max_error_rate": 0.5}), ["long.tpot_ms.p95=138"])
    level = analyze(frame, run, top, class_slos=slos).levels[1]
    assert level.status == "uncertain" and level.classes["long"].status == "uncertain"


def test_the_hold_is_told_in_words_only_when_it_waited_for_something():
    """A level whose requests all ended in its window read "held 0.1 s for 0 requests" beside its spillover."""
    from loadtest.report.terminal import describe_hold

    hold = {"held_s": 0.1, "waited_for": 0, "ended": "drained", "censored": 0, "cap_s": 30.0}
    assert describe_hold(hold) == "" and describe_hold(None) == ""
    assert describe_hold({**hold, "held_s": 1.24, "waited_for": 1}) == "held 1.2 s for 1 request"
    assert describe_hold({**hold, "held_s": 30.0, "waited_for": 4, "ended": "cap", "censored": 2}) == \
        "held 30.0 s for 4 requests (cap): 2 cut"
