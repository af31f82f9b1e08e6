"""A level's batch from the server's running gauge, and the profile's one-user base taken from its own run.

Why: CI once ran the profile on a loaded machine, where one of the two scrapes in
the one-user run landed in the gap between requests. The gauge's p50 read 0.5,
the one-user point was filed under 0.5 sequences, the profile looked for it
under 1.0, said "one user's decode gave no inter-token latency" and ran no
decode ladder. Stubs stand in for the analyzed runs: these are the two rules,
not the measurement.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from loadtest.analysis.bounds import running_sequences
from loadtest.analysis.server import SignalStats
from loadtest.profile import runner
from loadtest.profile.output import profile_dict
from loadtest.profile.plan import ProfilePlan


class _Server:
    """A server view whose running gauge gives ``p50s[level index]``."""

    def __init__(self, p50s: dict[int, float]):
        self.p50s = p50s

    def first_of_role(self, role):
        return SimpleNamespace(metric="running") if role == "running" else None

    def pod_stats(self, index, metric):
        p50 = self.p50s.get(index)
        return None if p50 is None else SignalStats(p50=p50, p95=p50, max=max(p50, 1.0), n=2)


def _level(index: int, users: int, itl_ms: float):
    stat = SimpleNamespace(p50=itl_ms, p95=itl_ms * 1.1)
    return SimpleNamespace(index=index, concurrency=users, rate_rps=None, itl_ms=stat, tpot_ms=stat,
                           output_tokens_per_s=users * 1000 / itl_ms)


@pytest.mark.parametrize(("p50", "expected"), [(0.5, 1.0), (1.0, 1.0), (3.5, 3.5), (0.0, 4.0), (math.nan, 4.0)])
def test_the_batch_is_the_gauge_but_never_below_one_sequence(p50, expected):
    analysis = SimpleNamespace(server=_Server({0: p50}))
    assert running_sequences(analysis, _level(0, 4, 20.0)) == expected


def test_without_a_gauge_the_batch_is_the_users():
    assert running_sequences(SimpleNamespace(server=None), _level(0, 3, 20.0)) == 3.0


def _analysis(levels, p50s):
    frame = pd.DataFrame({"measured": [True] * 4, "ok": [True] * 4, "prompt_tokens": [128.0, 128.0, 256.0, 256.0],
                          "ttft_ms": [130.0, 131.0, 258.0, 259.0], "completion_tokens": [32.0] * 4, "pos": [0] * 4})
    return SimpleNamespace(levels=levels, server=_Server(p50s), requests=frame)


def _profile(monkeypatch, tmp_path, runs, *, max_batch, ran=None):
    """The profile's steps over canned analyses (``runs``, by run folder name); ``ran`` collects the folders."""
    def fake_run(scenario, folder: Path, itl_growth_stop=None):
        if ran is not None:
            ran.append(folder.name)
        return runs.get(folder.name, _analysis([], {})), False

    monkeypatch.setattr(runner, "_run", fake_run)
    monkeypatch.setattr(runner, "_server_column", lambda folder, column: (np.array([]), np.array([])))
    monkeypatch.setattr(runner, "prefill_scenario", lambda scenario, plan, lengths: None)
    monkeypatch.setattr(runner, "decode_scenario", lambda scenario, plan, batch, name, limit=None: None)
    scenario = SimpleNamespace(name="p", target=SimpleNamespace(base_url="http://127.0.0.1:1/v1", model="m", api="chat"))
    data = runner.ProfileData(scenario=scenario, folder=tmp_path, server_facts={})
    runner._profile(None, ProfilePlan(max_batch=max_batch, knee_rounds=0), data)
    return data


@pytest.mark.parametrize("gauge_at_one_user", [0.5, 1.0, 2.0])
def test_the_profile_runs_its_ladder_whatever_the_gauge_read_at_one_user(monkeypatch, tmp_path, gauge_at_one_user):
    # 2.0: another client's request on the same server while the one-user run ran.
    runs = {
        "prefill": _analysis([], {}),
        "decode-1": _analysis([_level(0, 1, 16.7)], {0: gauge_at_one_user}),
        "decode-ladder": _analysis([_level(0, 2, 16.9), _level(1, 4, 17.3)], {0: 2.0, 1: 4.0}),
    }
    ran: list[str] = []
    data = _profile(monkeypatch, tmp_path, runs, max_batch=4, ran=ran)
    assert ran[:3] == ["prefill", "decode-1", "decode-ladder"]
    assert not any("no inter-token latency" in note for note in data.notes)
    assert data.decode is not None
    # One user's ms per token is the one-user run's, though its point is filed under the gauge's
    # batch (and at 2.0 the ladder's own 2-sequence point replaced it in the fit's points).
    assert profile_dict(data, None, None)["decode"]["ms_per_token_1"] == 16.7
    assert not any("decode ladder stopped" in note for note in data.notes)  # it ran to its top, 4


def test_a_decode_ladder_stopped_by_its_itl_limit_says_so(monkeypatch, tmp_path):
    """A 1-thread llama.cpp server's ladder stopped at 2 of the 8 sequences asked for (ITL p50 past twice
    one user's), and profile.json never said why."""
    runs = {
        "prefill": _analysis([], {}),
        "decode-1": _analysis([_level(0, 1, 1.59)], {0: 1.0}),
        "decode-ladder": _analysis([_level(0, 2, 3.18)], {0: 2.0}),  # failed its limit: the sweep stopped
    }
    data = _profile(monkeypatch, tmp_path, runs, max_batch=8)
    assert any("decode ladder stopped at 2 of 8 sequences" in note and "(3.18 ms)" in note for note in data.notes), data.notes
    # stopped by another check of the ladder's SLO (its error budget): named, not blamed on the ITL
    runs["decode-ladder"].capacity = SimpleNamespace(binding="error_rate")
    data = _profile(monkeypatch, tmp_path, runs, max_batch=8)
    assert any("stopped at 2 of 8 sequences: its error_rate failed" in note for note in data.notes), data.notes


def _closed_loop(users: int, *, gap_s: float, duration_s: float = 1.0, ttft_s: float = 0.06, queued: int = 0):
    """Records of ``users`` closed-loop users over 20 s: requests of ``duration_s``, ``gap_s`` apart, staggered.

    ``queued`` more users wait for a slot the whole window (their first token comes after it).
    """
    rows = []
    for u in range(users):
        t = 0.1 * u
        while t < 20.0:
            rows.append((t, t, ttft_s * 1000.0, t + duration_s))
            t += duration_s + gap_s
    rows += [(0.0, 0.0, 30_000.0, 31.0)] * queued
    frame = pd.DataFrame(rows, columns=["start_wall", "sent_wall", "ttft_ms", "end_wall"])
    level = SimpleNamespace(index=0, concurrency=users + queued, window_start=2.0, end_wall=19.0,
                            itl_ms=SimpleNamespace(p50=ttft_s * 1000.0), rate_rps=None)
    return frame, level


def test_the_batch_is_what_most_steps_ran_not_a_gauge_that_samples_the_gaps():
    """A closed loop's users leave the batch between requests; a gauge's p50 read 9 at 10 users (the demo's false knee)."""
    frame, level = _closed_loop(10, gap_s=0.03)
    analysis = SimpleNamespace(server=_Server({0: 9.0}), requests=frame)
    # 10, not the gauge's 9, nor the mean over time (about 9.7): most steps ran all 10
    assert running_sequences(analysis, level) == 10.0


def test_a_gauge_a_sequence_above_the_client_counts_another_clients_load():
    frame, level = _closed_loop(10, gap_s=0.03)
    assert running_sequences(SimpleNamespace(server=_Server({0: 14.0}), requests=frame), level) == 14.0
    assert running_sequences(SimpleNamespace(server=_Server({0: 10.5}), requests=frame), level) == 10.0


def test_queued_users_are_not_in_the_batch():
    """Ten users on four slots, no gauge scraped: the batch is the four that have their first token."""
    frame, level = _closed_loop(4, gap_s=0.0, duration_s=30.0, queued=6)
    assert level.concurrency == 10
    assert running_sequences(SimpleNamespace(server=None, requests=frame), level) == 4.0


def test_behind_a_balancers_own_url_the_gauge_is_one_replicas_batch():
    """Scrapes of a balancer's URL read one replica each; the client's 10 users span all of them."""
    frame, level = _closed_loop(10, gap_s=0.03)
    server = _Server({0: 5.0})
    server.mixed = True
    assert running_sequences(SimpleNamespace(server=server, requests=frame), level) == 5.0


def test_a_decode_request_longer_than_the_levels_is_noted_and_one_that_fits_is_not():
    """A trial with 4 s decode levels saw its sub-runs' tables read "no data": a 256-token request
    at 30 ms takes 7.7 s. The profile now says why, and how long the levels would need to be."""
    plan = ProfilePlan(decode_level_s=4.0, warmup_s=1.0, decode_max_tokens=256)
    note = plan.short_level_note(30.0)
    assert note is not None
    assert "about 7.7 s at one user" in note and "up to 15.4 s" in note and "3 s window" in note
    assert "--decode-level-s above 16" in note
    # the ladder's top takes twice one user's time: 96 tokens at 17 ms is 1.6 s, 3.3 s there, in a 5 s window
    assert ProfilePlan(decode_level_s=6.0, warmup_s=1.0, decode_max_tokens=96).short_level_note(17.0) is None
    assert ProfilePlan(decode_level_s=4.0, warmup_s=1.0, decode_max_tokens=96).short_level_note(17.0) is not None
    assert plan.short_level_note(math.nan) is None

