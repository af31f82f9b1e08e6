"""Why the capacity stops there, end to end: a mock with four slots, a real run, summary.json's ``capacity_limit``.

The mock runs at most 4 sequences (``--max-batch 4``); a fifth request waits for a slot, and
its TTFT is then a whole request of another user's (16 tokens × 12-18 ms), far above the
100 ms limit, while at 4 users TTFT is a step or two (about 35 ms). So the capacity is 4,
bound by TTFT at 6, and the server's waiting count there reads the two queued users:
``slots``. Paired, not solo: both sides of the limit are more than twice their distance
from it (docs/testing.md).
"""

from __future__ import annotations

import json

from loadtest.mock.process import MockServer
from support.runkit import loadtest, write_scenario

MOCK = ["--max-batch", "4", "--decode-base-ms", "10", "--decode-per-seq-ms", "2", "--prefill-per-token-ms", "0"]


def test_a_slot_limited_server_is_named_by_its_queue(tmp_path):
    with MockServer(MOCK) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url,
            workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": {"mean": 16, "stddev": 4}},
            load={"levels": [2, 4, 6], "level_duration_s": 4, "warmup_s": 1},
            slo={"ttft_ms": {"p95": 100}, "itl_ms": {"p95": 100}},
        )
        done = loadtest("run", str(scenario), "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["capacity"]["concurrency"] == 4 and summary["capacity"]["binding"] == "ttft_ms.p95"
    limit = summary["capacity_limit"]
    assert limit["kind"] == "slots", limit
    assert limit["users"] == 6 and limit["sequences"] == 4 and limit["waiting"] >= 1
    assert "why it stops there: slots: the server ran about 4 of these requests at once" in done.stdout
