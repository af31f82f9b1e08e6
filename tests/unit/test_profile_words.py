"""A profile says only what it found: one rule for a decode point's bound and the fit's words, a fit
that cannot be checked said so, no negative fixed cost printed as a cost, and the server's own slots.

A new-user trial profiled a 1-thread llama-server with 4 slots (``-np 4``) and read: a table labelling
both decode points ``memory_or_overhead`` under a fit line saying "the step grows faster than the
batch: its compute, or threads it shares"; "decode fit: fixed -1.55 ms + 2.627 ms/seq" with
``rms_ms: 0.0`` from two points; and ``decode.slots: null`` while ``/props`` said ``total_slots: 4``.
``TRIAL`` is that profile's two decode points (prof1/profile.json).
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from loadtest import server_facts
from loadtest.analysis.decode_fit import DecodePoint, fit_decode
from loadtest.analysis.prefill_fit import fit_prefill
from loadtest.analysis.roofline import FIT_BELOW_KNEE, fit_bound
from loadtest.profile.output import decode_fit_line, print_profile, profile_dict
from loadtest.profile.runner import ProfileData

TRIAL = [DecodePoint(1, 1.0791, 1.4419, 633.2, 1.0985), DecodePoint(2, 3.7065, 4.9203, 435.8, 3.8637)]
#: A step that batching pays for: 20 ms shared by the batch, 0.5 ms a sequence (no knee).
SHARED = [DecodePoint(n, 20.0 + 0.5 * n) for n in (1, 2, 4, 8)]


def _data(points, facts=None, batches=()) -> ProfileData:
    scenario = SimpleNamespace(name="p", target=SimpleNamespace(base_url="http://127.0.0.1:1/v1", model="m", api="chat"))
    data = ProfileData(scenario=scenario, folder=Path("."), server_facts=dict(facts or {}))
    data.decode = fit_decode(points)
    data.batches = list(batches)
    return data


def _printed(profile) -> str:
    out = io.StringIO()
    print_profile(profile, Console(file=out, width=400))
    return out.getvalue()


def test_a_step_that_grows_faster_than_its_batch_is_compute_in_the_table_and_in_the_words():
    profile = profile_dict(_data(TRIAL), None, None)
    d = profile["decode"]
    assert d["batching_pays"] is False
    assert [p["bound"] for p in d["points"]] == ["compute", "compute"], d["points"]
    sentence = profile["summary"][0]
    assert "batching does not pay on this server: compute-bound" in sentence, sentence
    assert "1.08 ms at 1 sequence and 3.71 ms at 2" in sentence  # the measured ends, not the line's
    assert FIT_BELOW_KNEE not in _printed(profile)
    # an ordinary run's levels[].bound reads the same rule
    assert fit_bound(fit_decode(TRIAL), 2) == "compute"


def test_a_step_the_batch_shares_stays_memory_or_overhead_below_any_knee():
    profile = profile_dict(_data(SHARED), None, None)
    d = profile["decode"]
    assert d["batching_pays"] is True
    assert {p["bound"] for p in d["points"]} == {FIT_BELOW_KNEE}
    assert "batching does not pay" not in _printed(profile) and "compute" not in profile["summary"][0]


def test_a_two_point_fit_is_said_exact_and_a_negative_intercept_is_no_fixed_cost():
    d = profile_dict(_data(TRIAL), None, None)["decode"]
    assert d["exact_fit"] is True and d["rms_ms"] == 0.0
    assert d["fixed_ms"] < 0  # profile.json keeps the fitted number; the words do not call it a cost
    line = decode_fit_line(d)
    assert "fixed -" not in line and "-1.55" not in line, line
    assert "no fixed cost" in line and "does not hold" in line
    assert "2 batch sizes for as many fitted numbers" in line and "nothing checks it" in line
    # four points of a line: checked by the two beyond its two numbers, and its fixed cost is one
    shared = decode_fit_line(profile_dict(_data(SHARED), None, None)["decode"])
    assert shared.startswith("decode fit: fixed 20.00 ms + 0.500 ms/seq") and "nothing checks" not in shared


def test_a_prefill_line_below_zero_at_no_length_prints_no_negative_fixed_cost():
    """The trial's prefill read "prefill fit: -28.1 ms + 0.3892 ms/token": the curve bends upward."""
    rng = random.Random(1)
    lengths = [196] * 12 + [324] * 12 + [580] * 12
    ttft = [{196: 52.2, 324: 92.0, 580: 199.6}[n] * (1 + rng.uniform(-0.01, 0.01)) for n in lengths]
    data = _data(TRIAL)
    data.prefill = fit_prefill(lengths, ttft)
    assert data.prefill.fixed_ms < 0
    text = _printed(profile_dict(data, None, None))
    assert "prefill fit: -" not in text, text
    assert "prefill fit: 0.3" in text and "no fixed cost: the line's intercept is below zero" in text


def test_the_servers_own_slots_are_read_from_props(monkeypatch):
    def get(url, headers):
        return {"total_slots": 4, "default_generation_settings": {"n_ctx": 1024}} if url.endswith("/props") else None

    monkeypatch.setattr(server_facts, "_get", get)
    target = SimpleNamespace(base_url="http://127.0.0.1:1/v1", query=None, api_key_env=None)
    assert server_facts.read_server_facts(target) == {"n_ctx": 1024, "slots": 4}


def test_slots_come_from_the_server_where_the_ladder_stopped_below_them():
    # the trial: the ladder stopped at 2 (its step more than doubled), below the 4 slots
    profile = profile_dict(_data(TRIAL, {"slots": 4}, [(1.0, 1.0), (2.0, 2.0)]), None, None)
    assert profile["decode"]["slots"] == 4 and profile["decode"]["slots_source"] == "server"
    assert any(s.startswith("the server has 4 slots (its /props total_slots)") for s in profile["summary"])
    # where the ladder's batch stopped growing, that is the figure (the server's beside it where it differs)
    seen = profile_dict(_data(SHARED, {"slots": 4}, [(2.0, 2.0), (4.0, 4.0), (8.0, 4.0)]), None, None)
    assert seen["decode"]["slots"] == 4 and seen["decode"]["slots_source"] == "ladder"
    unknown = profile_dict(_data(TRIAL, {}, [(1.0, 1.0), (2.0, 2.0)]), None, None)
    assert unknown["decode"]["slots"] is None and unknown["decode"]["slots_source"] is None
