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
from support.tunnel import Tunnel

#: exit codes, words and counts, no latency bound: the kill may land in either level (untimed pass)
pytestmark = pytest.mark.untimed


def _killed_mid_run(tmp_path, tunnel: bool = False):
    """A run whose mock is stopped 2 s into the load (through a TCP tunnel: ssh -L to the server)."""
    out = tmp_path / "run"
    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "0"]) as mock, Tunnel(mock.port) as forward:
        scenario = write_scenario(
            tmp_path, forward.base_url() if tunnel else mock.base_url,
            load={"levels": [1, 2], "level_duration_s": 5, "min_level_duration_s": 5, "warmup_s": 0.5},
            slo={"ttft_ms": {"p95": 1000}, "max_error_rate": 0.05},
        )
        proc = start_run(scenario, out)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((out / "requests.parts").glob("*.parquet")):
            time.sleep(0.2)  # the load is under way (a first flush of records)
        time.sleep(2.0)
        mock.stop()  # a crash: refused connections from here on (through the tunnel: accepted, then closed)
        stopped_at = time.time()
        stdout, stderr = communicate_or_dump(proc, timeout=120)
    assert proc.returncode == 3, stdout[-2000:] + stderr[-2000:]
    assert "loadtest run: the target stopped answering" in stderr and "exit 3" in stderr, stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    lost = summary["target_lost"]
    assert lost is not None and set(lost["kinds"]) <= {"connect", "disconnect"} and lost["requests"] >= 5, lost
    assert summary["capacity"]["message"].startswith("The target stopped answering"), summary["capacity"]["message"]
    assert summary["warnings"][0].startswith("the target stopped answering")
    # once the load had ended the run asked once more, and the target still answered nothing
    after = json.loads((out / "run.json").read_text())["after_load"]
    assert after is not None and after["answered"] is False and after["ok"] is False, after
    assert after["error_kind"] in ("connect", "disconnect") and after["at_wall"] > stopped_at, after
    assert lost["confirmed_after_load"] is True, lost
    # counted, never dropped: the records hold every one of them as a failure
    records = read_requests(out)
    assert int((~records.ok & records.error_kind.isin(["connect", "disconnect"])).sum()) >= lost["requests"]
    assert (out / "report.html").is_file()
    return records, lost, stopped_at


def test_a_server_killed_mid_run_is_an_outage_exit_3_with_every_request_counted(tmp_path):
    records, lost, _ = _killed_mid_run(tmp_path)
    assert lost["kinds"].get("connect", 0) >= 3, lost  # refused: nothing listens any more


def test_a_dead_server_behind_a_tunnel_is_lost_and_its_closed_connections_are_disconnects(tmp_path):
    """ssh -L to a server that died: every connection is made, then closed before any response byte.

    A trial's first request after llama-server was killed read ``connect: HTTPConnectionClosed:
    connection closed.``: a connection that was made is no refusal. Here every request after the
    death is one, and the run must still say the target went away, and the users still back off.
    """
    records, lost, stopped_at = _killed_mid_run(tmp_path, tunnel=True)
    # sent after the mock had exited (a request the run's end cut is the harness's, and left aside)
    after = records[(records.start_wall > stopped_at) & records.error_kind.ne("cancelled")]
    assert len(after) and set(after.error_kind) == {"disconnect"}, after.error_kind.value_counts()
    assert (after.status == 0).all() and after.error.str.startswith(
        "the connection was closed before any response byte").all(), after.error.head().tolist()
    assert lost["kinds"].get("disconnect", 0) >= 5, lost
    # the users back off as after a refusal (100 ms, doubling to 2 s): 2 users, a few seconds, not a spin
    assert len(after) < 60, len(after)
