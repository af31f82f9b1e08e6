"""A server killed mid-run: the run says the target went away and exits 3, every request counted.

A trial killed llama-server 2 s into a level: the run read "This endpoint holds 1 concurrent
user within the SLOs; at 2 the p95 TTFT is unbounded …" and exited 0, as if the load had found
a capacity. Here a real ``loadtest mock`` is stopped while a real run sends to it.
"""

from __future__ import annotations

import json
import time

import pytest

from loadtest.mock.process import MockServer
from loadtest.records import read_requests
from support.procs import communicate_or_dump
from support.runkit import start_run, write_scenario

#: exit codes, words and counts, no latency bound: the kill may land in either level (untimed pass)
pytestmark = pytest.mark.untimed


def test_a_server_killed_mid_run_is_an_outage_exit_3_with_every_request_counted(tmp_path):
    out = tmp_path / "run"
    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "0"]) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url,
            load={"levels": [1, 2], "level_duration_s": 5, "min_level_duration_s": 5, "warmup_s": 0.5},
            slo={"ttft_ms": {"p95": 1000}, "max_error_rate": 0.05},
        )
        proc = start_run(scenario, out)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((out / "requests.parts").glob("*.parquet")):
            time.sleep(0.2)  # the load is under way (a first flush of records)
        time.sleep(2.0)
        mock.stop()  # a crash: refused connections from here on
        stdout, stderr = communicate_or_dump(proc, timeout=120)
    assert proc.returncode == 3, stdout[-2000:] + stderr[-2000:]
    assert "loadtest run: the target stopped answering" in stderr and "exit 3" in stderr, stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    lost = summary["target_lost"]
    assert lost is not None and set(lost["kinds"]) <= {"connect", "disconnect"} and lost["requests"] >= 5, lost
    assert summary["capacity"]["message"].startswith("The target stopped answering"), summary["capacity"]["message"]
    assert summary["warnings"][0].startswith("the target stopped answering")
    # counted, never dropped: the records hold every one of them as a failure
    records = read_requests(out)
    assert int((~records.ok & records.error_kind.isin(["connect", "disconnect"])).sum()) >= lost["requests"]
    assert (out / "report.html").is_file()
