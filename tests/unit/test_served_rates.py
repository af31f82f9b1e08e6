"""Rates per second of window count each request by the share of its life inside the window.

A trial found ``requests_per_s`` 11.0 where the server served 8.7: 14 closed-loop users start a
level together, so their requests end in batches a request's length apart, and a 2.55 s window
(a level decided early) held two batches of completions. Counted by share, the rate is what was
served whatever the phase.
"""

from __future__ import annotations

import pytest

from loadtest.analysis import SloSpec, analyze
from loadtest.analysis.windows import window_shares
from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame

import numpy as np

USERS, CHUNKS, TTFT_MS, ITL_MS = 14, 80, 100.0, 20.0
REQUEST_S = (TTFT_MS + ITL_MS * (CHUNKS - 1)) / 1000.0  # 1.68 s
WINDOW_S = 2.55  # in lock step after a 1 s warm-up, batches end at 1.68 and 3.36 s: both inside


def _level(stagger: bool):
    warmup = 1.7 if stagger else 1.0  # staggered, the last user starts 1.56 s in: every user is busy from 1.7 s
    levels = level_plan([USERS], warmup + WINDOW_S)
    rows = closed_loop_rows(0, USERS, levels[0]["start_wall"], warmup + WINDOW_S, ttft_ms=TTFT_MS, itl_ms=ITL_MS,
                            chunks=CHUNKS, warmup_s=warmup, stagger=stagger)
    for row in rows:
        row["prompt_tokens"] = 100
    analysis = analyze(to_frame(rows), run_dict(levels, warmup_s=warmup), SloSpec.from_dict({"itl_ms": {"p95": 1000}}))
    return analysis.levels[0]


@pytest.mark.parametrize("stagger", [False, True])
def test_a_short_window_gives_the_served_rate_whatever_the_phase(stagger):
    level = _level(stagger)
    served = USERS / (REQUEST_S + 0.001)  # each user: one request, then the next 1 ms later
    if not stagger:
        assert level.completed == 2 * USERS  # two batches ended in the window: 11.0/s by that count
    assert level.requests_per_s == pytest.approx(served, rel=0.03), (level.requests_per_s, served)
    assert level.goodput_rps == pytest.approx(level.requests_per_s)
    assert level.input_tokens_per_s == pytest.approx(100 * level.requests_per_s)
    # the same rate as the tokens' own, which count each chunk where it arrived
    assert level.requests_per_s * CHUNKS == pytest.approx(level.output_tokens_per_s, rel=0.03)


def test_a_span_counts_by_its_share_of_the_window():
    begin = np.array([0.0, 1.0, 2.0, 4.0, 3.0, np.nan, 2.5])
    end = np.array([2.0, 3.0, 2.5, 5.0, 3.0, 3.0, np.nan])
    shares = window_shares(begin, end, 1.0, 3.0)
    # half inside; whole; whole; after the window; no length, ended inside; no start; no end
    assert shares.tolist() == [0.5, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert window_shares(np.array([2.0]), np.array([2.0]), 1.0, 3.0).tolist() == [1.0]
