"""Why the capacity stops there, end to end: a mock with four slots, a real run, summary.json's ``capacity_limit``.

The mock runs at most 4 sequences (``--max-batch 4``); a fifth request waits for a slot, and
its TTFT is then a whole request of another user's (16 tokens × 12-18 ms), far above the
100 ms limit, while at 4 users TTFT is a step or two (about 35 ms). So the capacity is 4,
bound by TTFT at 6, and the server's waiting count there reads the two queued users:
``slots``; the same slots under fixed rates give ``slots`` with the requests in flight as
the load. Paired, not solo: both sides of the limit are more than twice their distance
from it (docs/testing.md).
"""

from __future__ import annotations

import json

from loadtest.mock.process import MockServer
from support.runkit import loadtest, write_scenario

MOCK = ["--max-batch", "4", "--decode-base-ms", "10", "--decode-per-seq-ms", "2", "--prefill-per-token-ms", "0"]


def _run(tmp_path, load: dict, slo: dict) -> tuple[object, dict]:
    """One run against the 4-slot mock: the finished command and its summary.json."""
    with MockServer(MOCK) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url,
            workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": {"mean": 16, "stddev": 4}},
            load=load, slo=slo,
        )
        done = loadtest("run", str(scenario), "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    return done, json.loads((tmp_path / "run" / "summary.json").read_text())


def test_a_slot_limited_server_is_named_by_its_queue(tmp_path):
    done, summary = _run(tmp_path, {"levels": [2, 4, 6], "level_duration_s": 4, "warmup_s": 1},
                         {"ttft_ms": {"p95": 100}, "itl_ms": {"p95": 100}})
    assert summary["capacity"]["concurrency"] == 4 and summary["capacity"]["binding"] == "ttft_ms.p95"
    limit = summary["capacity_limit"]
    assert limit["kind"] == "slots", limit
    assert limit["users"] == 6 and limit["sequences"] == 4 and limit["waiting"] >= 1
    assert "why it stops there: slots: the server ran about 4 of these requests at once" in done.stdout


def test_an_open_loop_past_the_slots_is_named_by_its_queue_and_its_requests_in_flight(tmp_path):
    """The same four slots at fixed rates: a request lasts about 16 steps of 12-18 ms, so four slots serve
    about 14 requests/s. 8 req/s holds (TTFT about 30 ms); at 20 req/s the queue grows through the level
    (TTFT over a second against 150 ms), and the mean in flight is several times the slots."""
    _, summary = _run(tmp_path, {"levels": None, "rates": [8, 20], "arrival": "constant", "max_in_flight": 64,
                                 "level_duration_s": 4, "warmup_s": 1},
                      {"ttft_ms": {"p95": 150}, "itl_ms": {"p95": 100}})
    assert summary["capacity"]["rate_rps"] == 8 and summary["capacity"]["binding"] == "ttft_ms.p95"
    limit = summary["capacity_limit"]
    assert limit["kind"] == "slots" and limit["sequences"] == 4 and limit["users"] > 5, limit
    assert "at 20 req/s (" in limit["sentence"] and "requests in flight on average" in limit["sentence"]
