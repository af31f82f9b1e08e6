"""``--refine`` below a first level that already fails: halve the load until a level passes, then bisect.

A mock with 2 slots that refuses a third request (HTTP 429, no queue): 2 users are served, 3
are not. Swept at 6 users alone, the run used to stop at "nothing to bisect: the lowest level
already fails" and the user had to guess a lower first level. Refine now probes 3 (half of 6:
refused), 1 (pass), then bisects to 2 (pass): capacity 2, found from below. The verdicts are
counts of refusals against a 5% error budget and a TTFT limit 25 times the mock's, not timings.
"""

from __future__ import annotations

import json

import pytest

from loadtest.mock.process import MockServer
from support.runkit import loadtest, summary, write_scenario

pytestmark = pytest.mark.untimed

MOCK = ["--max-batch", "2", "--rate-limit-queue", "0", "--retry-after-s", "0"]


def test_a_failing_first_level_is_halved_until_a_pass_and_then_bisected(tmp_path):
    with MockServer(MOCK) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url,
            workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 16},
            load={"levels": [6], "level_duration_s": 3, "warmup_s": 0.5, "max_level_duration_s": 10},
            slo={"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 1000}, "max_error_rate": 0.05},
        )
        result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), "--refine", timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    s = summary(tmp_path / "run")
    run_order = [(lv["concurrency"], lv["status"]) for lv in sorted(s["levels"], key=lambda lv: lv["index"])]
    assert run_order == [(6, "fail"), (3, "fail"), (1, "pass"), (2, "pass")], run_order
    cap = s["capacity"]
    assert (cap["concurrency"], cap["first_failing"]) == (2, 3), cap
    refine = json.loads((tmp_path / "run" / "run.json").read_text())["refine"]
    assert refine["ended"] == "closed" and refine["probes"] == 3, refine
    # before each probe, the wait for the server's queue: the mock drops a request whose client left, so one
    # short request found it idle each time
    assert [(w["before_index"], w["requests"], w["idle"]) for w in refine["waits"]] == [
        (1, 1, True), (2, 1, True), (3, 1, True)], refine["waits"]
    assert "refine: done after 3 probes: the bracket is closed between a pass at 2 concurrent users" in (
        result.stdout + result.stderr)
    assert s["capacity_limit"]["kind"] == "errors"  # the third user's request is refused, not slow


def test_an_idle_server_costs_one_short_request_before_a_probe():
    """Before each refine probe the run waits for the last batch's queue (load/settle.py); an idle server
    answers the first short request as fast as the preflight did, so nothing more is sent or said."""
    from loadtest.client.wire import Dialect
    from loadtest.load.settle import Settled, wait_until_idle
    from loadtest.scenario import parse_scenario

    with MockServer(["--max-batch", "4"]) as mock:
        scenario = parse_scenario({
            "name": "settle", "load": {"levels": [1]}, "workload": {"prompt_tokens": {"mean": 16}, "max_tokens": 8},
            "target": {"base_url": mock.base_url, "model": "mock-model", "api": "chat", "timeout_s": 10}})
        settled = wait_until_idle(scenario, Dialect(), "", baseline_ms=50.0, budget_s=10.0)
    assert (settled.requests, settled.idle) == (1, True), settled
    assert settled.line() is None
    slow = Settled(waited_s=2.4, requests=3, idle=True, first_ms=2105.0, last_ms=9.0)
    assert slow.line() == ("refine: waited 2.4 s for the server to work off the last level's queue before the next "
                           "probe (a short request answered in 2,105 ms, the last of 3 in 9 ms)")
    stuck = Settled(waited_s=30.0, requests=20, idle=False, first_ms=2105.0, last_ms=1900.0)
    assert "still slow after 30.0 s" in stuck.line() and "may wait behind the last level's queue" in stuck.line()
    refused = Settled(waited_s=10.2, requests=20, idle=False, first_ms=float("nan"), last_ms=float("nan"),
                      error="rate_limited")
    assert refused.line() == ("refine: the short requests sent to wait for the server's queue failed (rate_limited, "
                              "20 in 10.2 s); the next probe starts anyway")
