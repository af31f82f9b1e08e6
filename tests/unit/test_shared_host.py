"""A server on the load generator's host shares its cores: a busy host is said even when the client held.

A trial's llama-server (on 127.0.0.1) slowed 100x while another job's tests took one of the two
cores: ITL p95 1.6 ms -> 539 ms. ``host_contended`` stayed false, rightly (the client was not
delayed), and run.json's host_busy_pct 99.6 / host_others_pct 98.7 were the only trace: nothing
in the report or the terminal said it. The records here are synthetic (tests/support/synthetic.py),
with the trial's host figures in each level's client record, analyzed by the real pipeline.
"""

from __future__ import annotations

from support.synthetic import closed_loop_rows, level_plan, run_dict, to_frame

from loadtest.analysis import SloSpec, analyze
from loadtest.report.summary import summary_dict

SLO = {"ttft_ms": {"p95": 1000}, "max_error_rate": 0.01}
#: the trial's busy level (run g5): the client light and barely waiting, the cores taken
BUSY = {"host_cores": 2, "host_busy_pct": 99.6, "host_others_pct": 98.7, "host_cpu_pressure_pct": 89.8,
        "client_run_delay_pct": 4.2, "cpu_pct": 1.6}
#: the same server alone beside the client (run g1): its own threads keep the cores busy, few tasks wait
QUIET = {**BUSY, "host_busy_pct": 99.3, "host_others_pct": 96.0, "host_cpu_pressure_pct": 20.4, "client_run_delay_pct": 5.6}


def _analysis(base_url: str, *hosts: dict):
    plan = level_plan([1, 2][: len(hosts)], 6.0)
    rows = []
    for lv, host in zip(plan, hosts):
        lv["client"].update(host)
        rows += closed_loop_rows(lv["index"], lv["concurrency"], lv["start_wall"], 6.0, seed=lv["index"])
    run = run_dict(plan, slo=SLO)
    run["target"]["base_url"] = base_url
    return analyze(to_frame(rows), run, SloSpec.from_dict(SLO), resamples=200)


def _shared(analysis) -> list[str]:
    return [w for w in analysis.warnings if w.startswith("the host's cores were oversubscribed")]


def test_a_local_servers_busy_host_is_said_with_its_figures():
    analysis = _analysis("http://127.0.0.1:18431/v1", QUIET, BUSY)
    assert not any(lv.host_contended or lv.client_saturated for lv in analysis.levels)  # the client held
    [warning] = _shared(analysis)
    assert warning.startswith("the host's cores were oversubscribed at 2 concurrent users (a task waited for a core "
                              "90% of the time (CPU pressure); processes other than the client, the server among "
                              "them, used 99% of 2 cores): the client's timing held (its threads waited for a core "
                              "4% of the time), but the target (127.0.0.1) runs on this host"), warning
    assert warning in summary_dict(analysis)["warnings"]
    assert _shared(_analysis("http://localhost:8000/v1", BUSY))


def test_a_remote_server_or_a_server_alone_on_its_cores_is_not_warned_about():
    assert not _shared(_analysis("https://gpu-box.example:8000/v1", BUSY))  # its cores are not these
    assert not _shared(_analysis("http://127.0.0.1:18431/v1", QUIET, QUIET))  # busy with its own work only
