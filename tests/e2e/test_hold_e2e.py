"""Each request judged at the load it ran under, end to end (issue 23): real Locust, a real mock.

The mock's decode step is ``d(c) = 20 + 18 c`` ms with ``c`` sequences in the
batch (``loadtest/mock/MODEL.md``), so with closed-loop users and no prefill
every token of a request takes ``d(c)`` as long as the batch stays at ``c``:
TPOT = ``d(c)`` (38, 56, 92, 164 ms at 1, 2, 4, 8 users). Without the hold, the
4-user level's last requests ran their tokens at 8 users (164 ms steps) and its
TPOT p95 read 134 ms.
"""

from __future__ import annotations

import numpy as np
import pytest

from loadtest.analysis.verdict import DECIDED_AT_LOOK
from loadtest.mock.process import MockServer
from loadtest.records import read_requests, read_run_json
from support.runkit import loadtest, summary, write_scenario

MOCK = ["--decode-base-ms", "20", "--decode-per-seq-ms", "18", "--prefill-per-token-ms", "0"]


def step_ms(users: int) -> float:
    return 20.0 + 18.0 * users


@pytest.fixture(scope="module")
def long_answers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hold")
    with MockServer(MOCK) as mock:
        scenario = write_scenario(
            folder, mock.base_url,
            workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 16},
            load={"levels": [2, 4, 8], "level_duration_s": 6, "warmup_s": 1, "min_level_duration_s": 3},
            slo={"tpot_ms": {"p95": 137}, "max_error_rate": 0.01},
        )
        out = folder / "run"
        result = loadtest("run", str(scenario), "--out", str(out), timeout=240)
        late_ms = 1000.0 * mock.metrics()["loadtest_mock_step_late_seconds_max"]
    assert result.returncode == 0, result.stderr
    return out, late_ms


def test_tpot_at_each_level_is_that_levels_step_not_the_next_ones(long_answers):
    out, late_ms = long_answers
    levels = {lv["concurrency"]: lv for lv in summary(out)["levels"]}
    for users in (2, 4):
        p95 = levels[users]["tpot_ms"]["p95"]
        # Every step of a request at c users is d(c), late by at most the mock's worst lateness;
        # a request that ran its last tokens at the next level would read up to d(2c).
        assert step_ms(users) - 3 <= p95 <= step_ms(users) + 3 + late_ms, (users, p95, late_ms)
    assert levels[4]["status"] == "pass" and levels[8]["status"] == "fail"


def test_no_measured_request_ends_after_its_levels_hold(long_answers):
    out, _ = long_answers
    run = read_run_json(out)
    frame = read_requests(out)
    end = frame.start_wall + frame.e2e_ms / 1000.0
    held = run["levels"]  # the last too: the sweep's end on 8 users' failure waits for its requests
    for level in held:
        hold = level["hold"]
        assert hold["ended"] == "drained" and hold["censored"] == 0, hold
        assert hold["start_wall"] == level["end_wall"] and hold["end_wall"] >= hold["start_wall"]
        assert hold["held_s"] <= 16 * step_ms(level["concurrency"]) / 1000.0 + 1.0  # one request, and a tick
        mine = (frame.level_index == level["index"]) & ~frame.warmup & (frame.start_wall < level["end_wall"])
        assert mine.sum() >= 3
        assert np.all(end[mine] <= hold["end_wall"] + 1e-3), level["concurrency"]
        assert frame[mine].ok.all()  # finished, none cut
    # the next level starts only after the hold
    for before, after in zip(held, run["levels"][1:]):
        assert after["start_wall"] >= before["hold"]["end_wall"] - 1e-3
    # the hold is in summary.json too
    assert all("hold" in lv["decision"] for lv in summary(out)["levels"])


#: A long request's steps are not all d(c): a user sits out about one step between two requests,
#: one step in 5 of a chat request's (4 tokens) and one in 17 of a long one's, so with the classes
#: drawn alike about 9% of the time, and a long request's mean step at c users is d(0.91 c): 118 ms
#: at 6, 135 ms at 7, its TPOT p95 a few ms above (122 and 140 ms measured). A limit set from d(c)
#: itself (137 ms, between 128 and 146) sat 3 ms under 7 users' p95 in a suite run, inside the
#: client's own error bound; the limit is now midway between the two measured values.
CLASSES = [
    # chat: ITL p95 <= 191 holds to 9 users (a full batch's step, 182 ms), fails at 10 (200 ms)
    {"name": "chat", "weight": 1, "max_tokens": 4, "slo": {"itl_ms": {"p95": 191}}},
    # long: TPOT p95 <= 131 holds to 6 users (122 ms), fails at 7 (140 ms)
    {"name": "long", "weight": 1, "max_tokens": 16, "slo": {"tpot_ms": {"p95": 131}}},
]


@pytest.mark.solo  # each class's limit is 9 ms from its levels' measured values
def test_two_classes_give_capacity_six_bound_by_long_and_agree_with_the_looks(tmp_path):
    with MockServer(MOCK) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url,
            workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "classes": CLASSES},
            load={"levels": [4, 8], "level_duration_s": 8, "warmup_s": 1, "min_level_duration_s": 4},
            slo={"max_error_rate": 0.01},
        )
        out = tmp_path / "run"
        result = loadtest("run", str(scenario), "--out", str(out), "--refine", timeout=400)
    assert result.returncode == 0, result.stderr
    data = summary(out)
    cap = data["capacity"]
    assert cap["concurrency"] == 6 and cap["first_failing"] == 7, cap["message"]
    assert cap["binding_class"] == "long" and cap["binding"] == "tpot_ms.p95"
    # The sweep and the report are one decision: every level a look decided keeps that verdict,
    # and a failing look's check (named with its class) fails in the report.
    for level in data["levels"]:
        decision = level["decision"]
        if decision.get("ended") not in DECIDED_AT_LOOK:
            continue
        assert level["status"] == decision["verdict"], (level["concurrency"], decision)
        if decision["verdict"] == "fail":
            name, _, check = decision["check"].partition(".")
            assert any(c["name"] == check and c.get("class") == name and c["verdict"] == "fail"
                       for c in level["checks"]), (decision, level["checks"])
        for name, class_level in level["classes"].items():
            if decision["verdict"] == "pass":
                assert class_level["status"] == "pass", (level["concurrency"], name)
