"""A profile against a fleet works per replica: its users are sequences × replicas, its slots and tokens/s per replica.

Why: against two replicas behind nginx the knee probes, chosen in sequences, were sent as that many
users (10, 12 and 14 sequences a replica, all below a knee at 20.6: the per-sequence cost came out
18% high), the slot detector called 1 the server's slot limit (2 users ran 1 sequence on each
replica), and the table gave the fleet's tokens/s beside one replica's batch. Stubs stand in for the
analyzed sub-runs: each level's batch is its users over the replicas, and its step the roofline
mock's, ``max(16.5 + 0.224 n, 0.5 + n)`` ms (tests/e2e/test_profile.py), so the fit has exact points.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from loadtest.analysis.server import SignalStats
from loadtest.profile import runner
from loadtest.profile.output import print_profile, profile_dict
from loadtest.profile.plan import ProfilePlan

REPLICAS = 2


def _step_ms(n: float) -> float:
    return max(16.5 + 0.224 * n, 0.5 + 1.0 * n)


class _Gauge:
    """The per-pod mean of the running gauge: each replica's share of the users (at least one request in all)."""

    def __init__(self, levels, replicas):
        self.p50 = {lv.index: lv.concurrency / replicas for lv in levels}

    def first_of_role(self, role):
        return SimpleNamespace(metric="running") if role == "running" else None

    def pod_stats(self, index, metric):
        p50 = self.p50[index]
        return SignalStats(p50=p50, p95=p50, max=math.ceil(p50), n=20)


def _analysis(users: list[int], replicas: int, source: str | None):
    levels = []
    for i, u in enumerate(users):
        step = _step_ms(max(1.0, u / replicas))
        stat = SimpleNamespace(p50=step, p95=step * 1.1)
        busy = min(replicas, u)  # the replicas with a sequence
        levels.append(SimpleNamespace(index=i, concurrency=u, rate_rps=None, itl_ms=stat, tpot_ms=stat,
                                      output_tokens_per_s=busy * max(1.0, u / replicas) * 1000 / step))
    frame = pd.DataFrame({"measured": [True] * 4, "ok": [True] * 4, "prompt_tokens": [128.0, 128.0, 256.0, 256.0],
                          "ttft_ms": [130.0, 131.0, 258.0, 259.0]})
    return SimpleNamespace(levels=levels, server=_Gauge(levels, replicas), requests=frame if not users else None,
                           autoscaling=SimpleNamespace(replicas=replicas, replicas_source=source), capacity=None)


def _profile(monkeypatch, tmp_path: Path, replicas: int, source: str | None, analysis_of=None,
             plan: ProfilePlan | None = None):
    """Runs the profile's steps over the stubs; returns (data, the users each sub-run was asked for).

    ``analysis_of(users)``: a sub-run's analysis for the users it was asked for (default: :func:`_analysis`)."""
    asked: dict[str, list[int]] = {}

    def decode_scenario(scenario, plan, levels, name, limit=None):
        asked[name] = list(levels)
        return name

    def fake_run(scenario, folder: Path, itl_growth_stop=None):
        users = asked.get(folder.name, [])
        return (analysis_of(users) if analysis_of else _analysis(users, replicas, source)), False

    monkeypatch.setattr(runner, "_run", fake_run)
    monkeypatch.setattr(runner, "_server_column", lambda folder, column: (np.array([]), np.array([])))
    monkeypatch.setattr(runner, "prefill_scenario", lambda scenario, plan, lengths: None)
    monkeypatch.setattr(runner, "decode_scenario", decode_scenario)
    scenario = SimpleNamespace(name="p", target=SimpleNamespace(base_url="http://127.0.0.1:1/v1", model="m", api="chat"))
    data = runner.ProfileData(scenario=scenario, folder=tmp_path, server_facts={})
    runner._profile(None, plan or ProfilePlan(max_batch=32, knee_rounds=1), data)
    return data, asked


def test_against_two_replicas_the_ladder_and_the_knee_probes_put_their_sequences_on_each(monkeypatch, tmp_path):
    data, asked = _profile(monkeypatch, tmp_path, REPLICAS, "processes")
    assert asked["decode-1"] == [1]
    assert asked["decode-ladder"] == [4, 8, 16, 32, 64]  # 2 … 32 sequences a replica (--max-batch 32)
    # the knee (20.6 sequences) lies between the ladder's 16 and 32: the probes are placed there, per replica
    probes = [u / REPLICAS for u in asked["decode-knee-1"]]
    assert probes and all(16 < n < 32 for n in probes), asked["decode-knee-1"]
    profile = profile_dict(data, None, None)
    d = profile["decode"]
    assert d["per_seq_ms"] == pytest.approx(0.224, rel=0.02)
    assert d["knee_sequences"] == pytest.approx(16 / (1 - 0.224), abs=0.5)
    assert d["slots"] is None  # each replica's batch grew with its share of the users
    assert not any("at most about" in s for s in profile["summary"])
    assert d["server_running_check"] == []  # the gauge (per pod) read each replica's share


def test_profile_json_the_table_and_the_summary_say_the_fleet_and_one_replicas_tokens(monkeypatch, tmp_path):
    data, _ = _profile(monkeypatch, tmp_path, REPLICAS, "processes")
    profile = profile_dict(data, None, None)
    assert profile["replicas"] == 2 and profile["replicas_source"] == "processes"
    assert profile["summary"][0].startswith("the target is a fleet of 2 replicas (counted from the processes")
    at32 = next(p for p in profile["decode"]["points"] if p["sequences"] == 32)
    assert at32["users"] == 64
    assert at32["tokens_per_s_per_replica"] == pytest.approx(32 * 1000 / _step_ms(32), rel=0.01)  # 985
    assert at32["tokens_per_s"] == pytest.approx(2 * at32["tokens_per_s_per_replica"], rel=0.01)  # the endpoint's
    one = next(p for p in profile["decode"]["points"] if p["sequences"] == 1)
    assert one["tokens_per_s_per_replica"] == one["tokens_per_s"]  # one user kept one replica busy
    console = _Console()
    print_profile(profile, console)
    assert "tokens/s per replica" in console.text and "sequences per replica" in console.text


def test_against_one_server_nothing_changes(monkeypatch, tmp_path):
    data, asked = _profile(monkeypatch, tmp_path, 1, "metrics")
    assert asked["decode-ladder"] == [2, 4, 8, 16, 32]
    profile = profile_dict(data, None, None)
    assert profile["replicas"] == 1 and profile["summary"][0].startswith("decode is")
    assert all(p["tokens_per_s_per_replica"] == p["tokens_per_s"] for p in profile["decode"]["points"])
    console = _Console()
    print_profile(profile, console)
    assert "per replica" not in console.text


class _Console:
    """What print_profile prints, as plain text (rich's tables rendered to a string)."""

    def __init__(self):
        from rich.console import Console

        self._console = Console(width=200, record=True, file=io.StringIO())

    def print(self, *args, **kwargs):
        self._console.print(*args, **kwargs)

    @property
    def text(self) -> str:
        return self._console.export_text(clear=False)


def test_a_declared_fleet_without_metrics_counts_each_replicas_share_of_the_clients_requests():
    """``target.replicas: 2`` and no server metrics: the client's 8 requests in the batch are 4 a replica
    (the count the run's cost and forecast already used; the batch was read as 8)."""
    from loadtest.analysis.bounds import running_sequences

    frame = pd.DataFrame({"start_wall": [0.0] * 8, "sent_wall": [0.0] * 8, "ttft_ms": [50.0] * 8, "end_wall": [30.0] * 8})
    level = SimpleNamespace(index=0, concurrency=8, window_start=2.0, end_wall=19.0, rate_rps=None,
                            itl_ms=SimpleNamespace(p50=20.0))
    declared = SimpleNamespace(server=None, requests=frame,
                               autoscaling=SimpleNamespace(replicas=2, replicas_source="declared"))
    assert running_sequences(declared, level) == 4.0
    one = SimpleNamespace(server=None, requests=frame, autoscaling=SimpleNamespace(replicas=None, replicas_source=None))
    assert running_sequences(one, level) == 8.0


def test_a_level_one_replica_carried_alone_divides_its_batch_users_and_tokens_by_that_one(monkeypatch, tmp_path):
    """A review leftover: at a level where one of two replicas was down (its metrics silent, the live one's
    gauge holding every user), the point's batch was divided by the replicas that served (1) and its
    tokens/s per replica by the fleet's (2): one replica's whole batch beside half its throughput."""
    down_users = 16  # the ladder's top (8 sequences a replica): the replica that answered ran all 16

    def analysis_of(users):
        analysis = _analysis(users, REPLICAS, "declared")
        top = [lv for lv in analysis.levels if lv.concurrency == down_users]
        if top:
            lv = top[0]
            step = _step_ms(down_users)
            lv.itl_ms = lv.tpot_ms = SimpleNamespace(p50=step, p95=step * 1.1)
            lv.output_tokens_per_s = down_users * 1000 / step  # one replica's, and so the endpoint's
            analysis.server.p50[lv.index] = float(down_users)
            analysis.server.fleet = SimpleNamespace(reporting={lv.index: SimpleNamespace(serving=1)})
        return analysis

    data, asked = _profile(monkeypatch, tmp_path, REPLICAS, "declared", analysis_of, ProfilePlan(max_batch=8, knee_rounds=0))
    assert asked["decode-ladder"] == [4, 8, 16]

    profile = profile_dict(data, None, None)
    top = next(p for p in profile["decode"]["points"] if p["users"] == down_users)
    assert top["sequences"] == down_users
    assert top["tokens_per_s_per_replica"] == top["tokens_per_s"] == pytest.approx(down_users * 1000 / _step_ms(16), rel=0.01)
    assert top["replicas"] == 1
    shared = next(p for p in profile["decode"]["points"] if p["users"] == 8)
    assert shared["replicas"] == 2 and shared["tokens_per_s_per_replica"] == pytest.approx(shared["tokens_per_s"] / 2, rel=0.01)
    assert any(n.startswith(f"at {down_users} users 1 of the 2 replicas ran the load") for n in profile["notes"])
    console = _Console()
    print_profile(profile, console)
    assert f"{down_users} on 1" in console.text
