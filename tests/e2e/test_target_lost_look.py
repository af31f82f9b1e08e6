"""A server killed a moment before the look that ends its level is an outage, not a capacity.

Its streak of refused connections then lasts less than half a second, which the records alone
cannot tell from a live overloaded server's last-instant refusals: the run read "This endpoint
holds 2 concurrent users within the SLOs; at 8 the error rate is 20.0%", exit 0, off a server
that was gone (32 failures over 0.32 s before the change). The run now asks once more after the
load (run.json's ``after_load``), and a target that still answers nothing is lost: exit 3.
A real ``loadtest mock`` is stopped 0.3 s before the level's one look.
"""

from __future__ import annotations

import json
import time

from loadtest.mock.process import MockServer
from loadtest.records import read_requests
from support.procs import communicate_or_dump
from support.runkit import start_run, write_scenario

#: before the level's one look at 3 s: refusals for ~0.3 s, then the look fails the level on them
KILL_BEFORE_LOOK_S = 0.3


def _level_start(run_json, index: int, timeout_s: float = 60.0) -> float:
    """The wall time level ``index`` began, once run.json (rewritten at each level change) has it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # bounded
        try:
            levels = json.loads(run_json.read_text()).get("levels") or []
        except (OSError, ValueError):  # not written yet, or caught mid-write
            levels = []
        if len(levels) > index:
            return float(levels[index]["start_wall"])
        time.sleep(0.02)
    raise AssertionError(f"level {index} did not begin within {timeout_s:g} s")


def test_a_server_killed_just_before_the_deciding_look_is_an_outage(tmp_path):
    out = tmp_path / "run"
    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "0"]) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url, workload={"max_tokens": 16},
            load={"levels": [2, 8], "level_duration_s": 3, "min_level_duration_s": 3, "max_level_duration_s": 3,
                  "warmup_s": 0.5},
            slo={"ttft_ms": {"p95": 1000}, "max_error_rate": 0.05},
        )
        proc = start_run(scenario, out)
        start = _level_start(out / "run.json", 1)
        time.sleep(max(0.0, start + 3.0 - KILL_BEFORE_LOOK_S - time.time()))
        mock.stop()  # a crash: refused connections from here on
        stdout, stderr = communicate_or_dump(proc, timeout=120)
    assert proc.returncode == 3, stdout[-2000:] + stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    lost = summary["target_lost"]
    assert lost is not None and lost["level_index"] == 1 and lost["confirmed_after_load"] is True, lost
    assert summary["capacity"]["message"].startswith("The target stopped answering"), summary["capacity"]["message"]
    after = json.loads((out / "run.json").read_text())["after_load"]
    assert after["answered"] is False and after["error_kind"] == "connect", after
    # every failure counted; and the streak was the short kind the records alone cannot call an outage
    records = read_requests(out)
    failed = records[~records.ok & records.error_kind.isin(["connect", "disconnect"])]
    assert len(failed) >= lost["requests"] >= 5
    ends = failed.start_wall + failed.e2e_ms.fillna(0.0) / 1000.0
    assert ends.max() - ends.min() < 0.5 + 0.2, (ends.max() - ends.min())  # the look may come a tick late
