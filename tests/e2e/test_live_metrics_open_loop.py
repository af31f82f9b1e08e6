"""Live and pushed metrics of open-loop runs: what the histograms count and what the gauges read.

Real runs (``loadtest run`` against ``loadtest mock``) scraped on ``--metrics-port`` while they go, and a
real Pushgateway (Debian's package) that receives the summary. The mock: 4 slots, 16-token answers of
25 ms steps, so a request takes 0.4 s and the server completes at most 10 req/s (docs/mock.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from loadtest.export.push import summary_registry
from loadtest.mock.process import MockServer
from loadtest.records import read_requests
from support.procs import free_port, reap, stop, wait_http
from support.runkit import write_scenario

PUSHGATEWAY = shutil.which("prometheus-pushgateway") or "/usr/bin/prometheus-pushgateway"


def _scrape(port: int) -> dict[tuple[str, tuple], float] | None:
    """One scrape of a run's /metrics as {(sample name, sorted labels): value}; None if it does not answer."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


# Not untimed: it scrapes the run while it goes (a scrape that must catch the second level, docs/testing.md).
def test_an_ended_levels_histograms_hold_the_requests_the_analysis_measured(tmp_path):
    """Open loop at 6 req/s on a 10 req/s mock (4 slots, 16 tokens × 25 ms): the level's hold keeps
    sending at 6 req/s until its measured requests end, about 0.4 s, so a few of its arrivals are
    started after the window. The analysis leaves them out, and so do the live histograms now; the
    request counter keeps them (it counts every record). Before, the e2e histogram counted them too
    (the trial's 23 against 22 measured at 2 req/s)."""
    port = free_port()
    with MockServer(["--max-batch", "4", "--decode-base-ms", "25", "--decode-per-seq-ms", "0",
                     "--prefill-per-token-ms", "0"]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, name="held", workload={"max_tokens": 16},
                                  load={"levels": None, "rates": [6, 8], "arrival": "constant", "max_in_flight": 32,
                                        "level_duration_s": 3, "min_level_duration_s": 3, "max_level_duration_s": 3,
                                        "warmup_s": 0.5},
                                  slo={"ttft_ms": {"p95": 5000}, "itl_ms": {}, "max_error_rate": 0.5})
        run = subprocess.Popen([sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(tmp_path / "run"),
                                "--metrics-port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        last = None
        try:
            deadline = time.monotonic() + 120
            while run.poll() is None and time.monotonic() < deadline:
                got = _scrape(port)
                if got is not None and got.get(("loadtest_level_index", (("scenario", "held"),))) in (1.0, -1.0):
                    last = got  # the latest scrape after level 0 ended (the level-0 records come in meanwhile)
                time.sleep(0.3)
            _, stderr = run.communicate(timeout=120)
        finally:
            reap(run)
    assert run.returncode == 0, stderr
    assert last is not None, "no scrape during the second level"
    level0 = (("class", ""), ("level", "6"), ("scenario", "held"))
    e2e_count = last[("loadtest_e2e_seconds_count", level0)]
    ttft_count = last[("loadtest_ttft_seconds_count", level0)]
    total = sum(v for (name, labels), v in last.items()
                if name == "loadtest_requests_total" and dict(labels).get("level") == "6")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    measured = summary["levels"][0]
    assert measured["errors"] == 0 and measured["cancelled"] == 0, measured["errors_by_kind"]
    assert e2e_count == ttft_count == measured["e2e_ms"]["n"], (e2e_count, ttft_count, measured["e2e_ms"]["n"])
    records = read_requests(tmp_path / "run")
    held = records[(records.level_index == 0) & ~records.warmup
                   & (records.scheduled_wall >= measured["window"]["end_wall"])]
    assert len(held) >= 1 and total >= e2e_count + len(held), (total, e2e_count, len(held))


# Not untimed: it must scrape the run while its levels go.
@pytest.mark.skipif(not Path(PUSHGATEWAY).exists(), reason="Debian's prometheus-pushgateway is not installed")
def test_open_loop_users_read_the_requests_in_flight_and_the_pushed_capacity_says_its_unit(tmp_path):
    """Open loop's users are max_in_flight (32) idle senders: loadtest_users read 32 all through a
    6 req/s level, which a Grafana "users" panel showed as 32 users. It now reads the requests in
    flight (about rate × 0.4 s here), as loadtest_in_flight does. The pushed loadtest_capacity is a
    rate in open loop: loadtest_load_mode{mode="open_loop"} and loadtest_capacity_rate_rps say so."""
    port, push_port = free_port(), free_port()
    gateway = subprocess.Popen([PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{push_port}",
                                f"--persistence.file={tmp_path / 'pushgateway.data'}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    push_url = f"http://127.0.0.1:{push_port}"
    try:
        wait_http(push_url + "/-/ready", gateway)
        with MockServer(["--max-batch", "4", "--decode-base-ms", "25", "--decode-per-seq-ms", "0",
                         "--prefill-per-token-ms", "0"]) as mock:
            scenario = write_scenario(tmp_path, mock.base_url, name="rates", workload={"max_tokens": 16},
                                      load={"levels": None, "rates": [6, 8], "arrival": "constant",
                                            "max_in_flight": 32, "level_duration_s": 4, "min_level_duration_s": 4,
                                            "max_level_duration_s": 4, "warmup_s": 0.5},
                                      # 21 samples at 6 req/s: enough for a p95 verdict (15 left it uncertain)
                                      slo={"ttft_ms": {"p95": 5000}, "itl_ms": {}, "max_error_rate": 0.5})
            run = subprocess.Popen([sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(tmp_path / "run"),
                                    "--metrics-port", str(port), "--pushgateway", push_url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
            users, in_flight = [], []
            try:
                deadline = time.monotonic() + 120
                while run.poll() is None and time.monotonic() < deadline:
                    got = _scrape(port)
                    if got is not None and got.get(("loadtest_level_index", (("scenario", "rates"),)), -1) >= 0:
                        users.append(got[("loadtest_users", (("scenario", "rates"),))])
                        in_flight.append(got.get(("loadtest_in_flight", (("scenario", "rates"),))))
                    time.sleep(0.3)
                _, stderr = run.communicate(timeout=120)
            finally:
                reap(run)
        assert run.returncode == 0, stderr
        assert len(users) >= 5, users
        # 8 req/s of 0.4 s requests hold about 3 in flight (Little's law); never the 32 senders
        assert 1 <= max(users) <= 12 and None not in in_flight and 1 <= max(in_flight) <= 12, (users, in_flight)
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(push_url + "/metrics", timeout=5) as resp:
            pushed = {(s.name, s.labels.get("mode")): s.value
                      for fam in text_string_to_metric_families(resp.read().decode()) for s in fam.samples
                      if s.labels.get("job") == "loadtest" and s.labels.get("scenario") == "rates"}
        rate = summary["capacity"]["rate_rps"]
        assert rate is not None and summary["capacity"]["concurrency"] is None
        assert pushed[("loadtest_load_mode", "open_loop")] == 1
        assert pushed[("loadtest_capacity_rate_rps", None)] == rate == pushed[("loadtest_capacity", None)]
        assert ("loadtest_capacity_speedup", None) not in pushed
    finally:
        stop(gateway)


@pytest.mark.untimed
def test_the_pushed_load_mode_names_the_unit_of_each_capacity():
    """Closed loop pushes users; trace replay a rate and its speedup (8.3 req/s was the 2× speedup)."""
    def pushed(summary: dict) -> dict:
        return {(s.name, s.labels.get("mode")): s.value for fam in summary_registry(summary).collect() for s in fam.samples}

    closed = pushed({"name": "c", "capacity": {"concurrency": 8, "verdict": "found"}, "levels": [{"concurrency": 8}]})
    assert closed[("loadtest_load_mode", "closed_loop")] == 1 and closed[("loadtest_capacity", None)] == 8
    assert ("loadtest_capacity_rate_rps", None) not in closed and ("loadtest_capacity_speedup", None) not in closed
    trace = pushed({"name": "t", "capacity": {"rate_rps": 8.3, "speedup": 2.0, "max_tested_rate_rps": 12.45,
                                              "max_tested_speedup": 3.0, "verdict": "found"},
                    "levels": [{"concurrency": 0, "rate_rps": 8.3, "speedup": 2.0}]})
    assert trace[("loadtest_load_mode", "trace_replay")] == 1
    assert trace[("loadtest_capacity", None)] == trace[("loadtest_capacity_rate_rps", None)] == 8.3
    assert trace[("loadtest_capacity_speedup", None)] == 2.0
    # a run whose capacity is below its first level still says its mode, from its levels
    below = pushed({"name": "b", "capacity": {"verdict": "below_min"}, "levels": [{"concurrency": 0, "rate_rps": 4.0}]})
    assert below[("loadtest_load_mode", "open_loop")] == 1
