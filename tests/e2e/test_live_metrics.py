"""The load generator's own metrics: ``--metrics-port`` scraped by a real Prometheus, ``--pushgateway``
received by a real Pushgateway (Debian's packages), and the Grafana dashboard's queries.

Prometheus and the Pushgateway listen on 127.0.0.1, with a config and a data folder the test writes.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from loadtest.export.live import HISTOGRAMS, METRIC_NAMES, LiveMetrics, TTFT_BUCKETS
from loadtest.export.push import PUSHED_NAMES, summary_registry
from loadtest.mock.process import MockServer
from loadtest.records import records_to_table
from support.procs import free_port, reap, stop, wait_http
from support.runkit import write_scenario

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PUSHGATEWAY = shutil.which("prometheus-pushgateway") or "/usr/bin/prometheus-pushgateway"


def _row(level, ttft_ms, chunks, ok=True, warmup=False, kind=None, cls=None, rate=None):
    return {"request_id": f"r{time.perf_counter_ns()}", "worker": "local", "user": 0, "level": level, "level_index": 0,
            "warmup": warmup, "start_wall": 0.0, "ttft_ms": ttft_ms, "e2e_ms": (chunks[-1] if chunks else 50.0) + 1,
            "chunk_ms": chunks, "chunk_tokens": [1] * len(chunks), "ok": ok, "error_kind": kind, "class": cls,
            "rate_rps": rate}


def _families(metrics: LiveMetrics) -> dict[str, list]:
    return {fam.name: fam.samples for fam in metrics.collect()}


@pytest.mark.untimed
def test_histograms_count_each_measured_request_once_and_gaps_within_a_request():
    m = LiveMetrics("unit")
    m.observe(records_to_table([
        _row(2, 20.0, [20.0, 30.0, 45.0]),              # gaps 10 ms, 15 ms
        _row(2, 30.0, [30.0, 31.0]),                    # gap 1 ms (never the 15 → 30 ms jump across requests)
        _row(2, 5.0, [5.0, 6.0], warmup=True),          # warm-up: counted, not in the histograms
        _row(2, float("nan"), [], ok=False, kind="timeout"),
        _row(4, 100.0, [100.0], cls="long"),
    ]))
    fams = _families(m)
    ttft = {(s.labels["level"], s.labels["class"], s.labels.get("le")): s.value
            for s in fams["loadtest_ttft_seconds"] if s.name.endswith("_bucket")}
    # the timeout, with no first token, is +inf as in the analysis: in +Inf only; its 51 ms until it failed in the sum
    assert ttft["2", "", "0.025"] == 1 and ttft["2", "", "0.05"] == 2 and ttft["2", "", "+Inf"] == 3
    assert ttft["4", "long", "0.075"] == 0 and ttft["4", "long", "0.1"] == 1  # le: an edge value is in its bucket
    sums = {(s.labels["level"], s.labels["class"]): s.value for s in fams["loadtest_ttft_seconds"] if s.name.endswith("_sum")}
    assert math.isclose(sums["2", ""], 0.05 + 0.051)
    itl = {s.labels["le"]: s.value for s in fams["loadtest_itl_seconds"]
           if s.name.endswith("_bucket") and s.labels["level"] == "2"}
    assert itl["0.001"] == 1 and itl["0.01"] == 2 and itl["0.015"] == 3 and itl["+Inf"] == 3
    outcomes = {(s.labels["level"], s.labels["outcome"]): s.value for s in fams["loadtest_requests"]}
    assert outcomes == {("2", "ok"): 3, ("2", "timeout"): 1, ("4", "ok"): 1}
    # A second batch adds to the first.
    m.observe(records_to_table([_row(2, 20.0, [20.0])]))
    again = {(s.labels["level"], s.labels.get("le")): s.value for s in _families(m)["loadtest_ttft_seconds"]
             if s.name.endswith("_bucket") and s.labels["class"] == ""}
    assert again["2", "0.025"] == 2


@pytest.mark.untimed
def test_open_loop_levels_are_labelled_by_their_rate_and_verdicts_by_level():
    m = LiveMetrics("open")
    m.observe(records_to_table([_row(3, 20.0, [20.0], rate=2.5)]))

    class Span:
        def __init__(self, i, c, rate=None, verdict=None):
            self.index, self.concurrency, self.rate_rps = i, c, rate
            self.decision = {"verdict": verdict} if verdict else {}

    m.level_changed(None, Span(0, 3, 2.5))
    assert {s.name: s.value for s in _families(m)["loadtest_level"]} == {"loadtest_level": 2.5}
    m.level_changed(Span(0, 3, 2.5, "fail"), None)
    fams = _families(m)
    assert {s.labels["level"] for s in fams["loadtest_ttft_seconds"]} == {"2.5"}
    verdicts = {(s.labels["level"], s.labels["verdict"]): s.value for s in fams["loadtest_level_verdict"]}
    assert verdicts[("2.5", "fail")] == 1 and verdicts[("2.5", "pass")] == 0
    assert fams["loadtest_level"][0].value == 0


@pytest.mark.untimed
def test_histograms_leave_out_cancelled_and_hold_requests_as_the_analysis_does():
    """The histograms take the requests the analysis measures: a request the harness cancelled (cut at
    the run's end) has no e2e sample (censored: its e2e is the time until the cut), though the TTFT
    it saw counts, as in the analysis; one its level started after the window ended (in the hold)
    is counted in loadtest_requests_total only. Open loop: timed from the scheduled time, as the
    analysis times it. They used to count all but warm-up: 105 e2e samples at a level where the
    analysis measured 56."""
    rows = [
        {**_row(16, 20.0, [20.0, 30.0], rate=16.0), "start_wall": 100.0, "schedule_lag_ms": 5.0},
        {**_row(16, float("nan"), [], ok=False, kind="cancelled", rate=16.0), "start_wall": 101.0},
        {**_row(16, 40.0, [40.0], ok=False, kind="cancelled", rate=16.0), "start_wall": 102.0},  # cut after its TTFT
        {**_row(16, 20.0, [20.0], rate=16.0), "start_wall": 110.5},  # scheduled after the window's end (110)
    ]
    m = LiveMetrics("cut")
    m.observe(records_to_table(rows), {0: 110.0})
    fams = _families(m)
    counts = {name: [s.value for s in fams[name] if s.name.endswith("_count")] for name in HISTOGRAMS}
    assert counts == {"loadtest_ttft_seconds": [2], "loadtest_itl_seconds": [1], "loadtest_e2e_seconds": [1]}, counts
    (ttft_sum,) = [s.value for s in fams["loadtest_ttft_seconds"] if s.name.endswith("_sum")]
    assert math.isclose(ttft_sum, 0.025 + 0.040)  # 20 ms from the send is 25 ms from the scheduled time
    outcomes = {(s.labels["level"], s.labels["outcome"]): s.value for s in fams["loadtest_requests"]}
    assert outcomes == {("16", "ok"): 2, ("16", "cancelled"): 2}
    # Before a level has ended its window end is unknown: the request is counted, as it is measured so far.
    early = LiveMetrics("early")
    early.observe(records_to_table(rows[2:]))
    assert [s.value for s in _families(early)["loadtest_e2e_seconds"] if s.name.endswith("_count")] == [1]


@pytest.mark.untimed
def test_a_failure_is_in_the_inf_bucket_as_the_analysis_counts_it_and_a_dropped_arrival_is_not_0_s():
    """A failed request is +inf in the analysis' percentiles (its e2e; its TTFT unless it saw a first
    token). The e2e histogram took its time until the failure, so an open-loop level whose arrivals were
    dropped at max_in_flight (e2e 0) read fast in histogram_quantile. Now every failure is in the +Inf
    bucket only, and the count is summary.json's e2e_ms.n; the sum adds the time until it failed."""
    rows = [
        {**_row(8, 20.0, [20.0, 30.0], rate=8.0), "start_wall": 100.0, "schedule_lag_ms": 0.0},
        {**_row(8, float("nan"), [], ok=False, kind="dropped", rate=8.0), "start_wall": 100.1, "e2e_ms": 0.0},
        {**_row(8, float("nan"), [], ok=False, kind="dropped", rate=8.0), "start_wall": 100.2, "e2e_ms": 0.0},
        {**_row(8, 40.0, [40.0], ok=False, kind="http_error", rate=8.0), "start_wall": 100.3, "e2e_ms": 45.0},
    ]
    m = LiveMetrics("lost")
    m.observe(records_to_table(rows))
    fams = _families(m)
    # e2e: the success (31 ms) alone is finite; TTFT: the success and the http error's first token (40 ms)
    for name, edge, finite in (("loadtest_e2e_seconds", "300", 1), ("loadtest_ttft_seconds", "0.05", 2)):
        buckets = {s.labels["le"]: s.value for s in fams[name] if s.name.endswith("_bucket")}
        assert buckets[edge] == finite and buckets["+Inf"] == 4, (name, buckets)  # no failure at 0 s
    (e2e_sum,) = [s.value for s in fams["loadtest_e2e_seconds"] if s.name.endswith("_sum")]
    assert math.isclose(e2e_sum, 0.031 + 0.045)  # the drops saw nothing; the http error 45 ms
    # histogram_quantile's view: with 3 of 4 failed, the p50 is past every finite bucket (summary.json: +inf)
    e2e = {s.labels["le"]: s.value for s in fams["loadtest_e2e_seconds"] if s.name.endswith("_bucket")}
    assert max(v for le, v in e2e.items() if le != "+Inf") < 0.5 * e2e["+Inf"]


def _query(prom: str, expr: str) -> list[dict]:
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.skipif(not Path(PROMETHEUS).exists() or not Path(PUSHGATEWAY).exists(),
                    reason="Debian's prometheus and prometheus-pushgateway are not installed")
def test_prometheus_scrapes_a_run_and_the_pushgateway_receives_its_summary(tmp_path):
    metrics_port, prom_port, push_port = free_port(), free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: loadtest\n    static_configs: [{{targets: ['127.0.0.1:{metrics_port}']}}]\n"
    )
    prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    # Debian's build persists to /var/lib/prometheus/pushgateway.data by default: a file of this
    # test's own, so no group pushed on this machine before (by hand, by another run) is read back
    gateway = subprocess.Popen([PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{push_port}",
                                f"--persistence.file={tmp_path / 'pushgateway.data'}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    prom_url, push_url = f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{push_port}"
    try:
        wait_http(prom_url + "/-/ready", prom)
        wait_http(push_url + "/-/ready", gateway)
        with MockServer(["--decode-base-ms", "10", "--prefill-per-token-ms", "0"]) as mock:
            scenario = write_scenario(tmp_path, mock.base_url, name="live",
                                      load={"levels": [2, 4], "level_duration_s": 8, "min_level_duration_s": 8,
                                            "warmup_s": 0.5})
            out = tmp_path / "run"
            run = subprocess.Popen(
                [sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(out),
                 "--metrics-host", "127.0.0.1", "--metrics-port", str(metrics_port), "--pushgateway", push_url],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            )
            try:
                during, users = None, []
                deadline = time.monotonic() + 90
                while run.poll() is None and time.monotonic() < deadline:
                    users += [float(r["value"][1]) for r in _query(prom_url, 'loadtest_users{scenario="live"}')]
                    result = _query(prom_url, 'loadtest_ttft_seconds_bucket{scenario="live"}')
                    if result and run.poll() is None:
                        p95 = _query(prom_url, 'histogram_quantile(0.95, sum by (le, level) '
                                               '(loadtest_ttft_seconds_bucket{scenario="live"}))')
                        verdicts = _query(prom_url, 'loadtest_level_verdict{scenario="live"} == 1')
                        during = (result, p95, verdicts)
                        if len({r["metric"]["level"] for r in result}) == 2:
                            break  # both levels seen while the run goes
                    time.sleep(0.5)
                assert during is not None, "no TTFT histogram was queried during the run"
                stdout, stderr = run.communicate(timeout=120)
            finally:
                reap(run)
        assert run.returncode == 0, stderr
        result, p95, verdicts = during
        # Level 2 had ended (its verdict pass, the SLOs are loose) when level 4's requests were scraped.
        assert [(r["metric"]["level"], r["metric"]["verdict"]) for r in verdicts] == [("2", "pass")], verdicts
        level2 = sorted(((float(r["metric"]["le"]), r["value"][1]) for r in result if r["metric"]["level"] == "2"))
        print("during the run: loadtest_ttft_seconds_bucket{level=\"2\"}:", [(le, v) for le, v in level2 if v != "0"][:6],
              "p95 by level:", json.dumps(p95), "verdicts:", json.dumps(verdicts))  # the report quotes it
        buckets = {r["metric"]["le"] for r in result}
        assert buckets == {f"{e:g}" for e in TTFT_BUCKETS} | {"+Inf"}
        assert {r["metric"]["job"] for r in result} == {"loadtest"} and all(r["metric"].get("class", "") == "" for r in result)  # no classes: an empty label, which Prometheus drops
        assert max(users) in (2.0, 4.0)
        summary = json.loads((out / "summary.json").read_text())
        by_level = {str(lv["concurrency"]): lv for lv in summary["levels"]}
        # Level 2 had ended when it was queried: its histogram holds every measured level-2 request
        # but those still in flight when it ended (at most one per user, 2 users), which finish later.
        from loadtest.records import read_requests

        rows = read_requests(out)
        # the requests started in level 2's measured window: those it started in its hold are not counted
        level2_rows = rows[(rows["level"] == 2) & ~rows["warmup"] & rows["ttft_ms"].notna()
                           & (rows["start_wall"] < by_level["2"]["window"]["end_wall"])]
        counted = float(dict(level2)[math.inf])
        assert len(level2_rows) - 2 <= counted <= len(level2_rows), (counted, len(level2_rows))
        edges = [0.0, *TTFT_BUCKETS, math.inf]
        estimate = next(float(r["value"][1]) for r in p95 if r["metric"]["level"] == "2")
        truth = by_level["2"]["ttft_ms"]["p95"] / 1000
        # The same requests: the estimate falls in the bucket of the analysis' p95 or a neighbour
        # (interpolation within a bucket, and the few requests the analysis window leaves out).
        i = int(np.searchsorted(edges, truth, side="left"))
        assert edges[max(i - 2, 0)] <= estimate <= edges[min(i + 1, len(edges) - 1)], (estimate, truth)

        # The Pushgateway holds the summary: the analysis' numbers, not the live counts.
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(push_url + "/metrics", timeout=5) as resp:
            pushed: dict[str, list] = {}
            for fam in text_string_to_metric_families(resp.read().decode()):
                for s in fam.samples:
                    if s.labels.get("job") == "loadtest":
                        pushed.setdefault(s.name, []).append(s)
        assert "pushed the summary" in stderr
        (cap,) = [s for s in pushed["loadtest_capacity"] if s.labels["scenario"] == "live"]
        assert cap.value == summary["capacity"]["concurrency"]
        lat = {(s.labels["level"], s.labels["metric"], s.labels["quantile"]): s.value
               for s in pushed["loadtest_summary_latency_seconds"]}
        for level, lv in by_level.items():
            assert math.isclose(lat[level, "ttft", "0.95"], lv["ttft_ms"]["p95"] / 1000)
            assert math.isclose(lat[level, "itl", "0.5"], lv["itl_ms"]["p50"] / 1000)
        (verdict,) = pushed["loadtest_capacity_verdict"]
        assert verdict.labels["verdict"] == summary["capacity"]["verdict"] and verdict.value == 1
    finally:
        stop(prom)
        stop(gateway)


@pytest.mark.untimed
def test_a_pushgateway_that_is_down_costs_a_warning_not_the_run(tmp_path):
    from loadtest.export.flags import push_after_run

    (tmp_path / "summary.json").write_text(json.dumps({"name": "x", "capacity": {}, "levels": []}))
    port = free_port()  # nothing listens there
    done = subprocess.run([sys.executable, "-c", "import sys; from loadtest.export.flags import push_after_run; "
                           f"push_after_run('http://127.0.0.1:{port}', sys.argv[1])", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "warning: --pushgateway" in done.stderr and "not pushed" in done.stderr
    assert push_after_run  # the function the command calls


@pytest.mark.untimed
def test_a_pushgateway_urls_user_and_password_are_sent_as_basic_auth(tmp_path):
    """urllib took ``u:password@127.0.0.1`` for the host and asked the resolver for it (the password in a DNS query)."""
    import base64
    import http.server
    import threading

    from loadtest.export.push import push_summary

    seen: list[tuple[str, str, str | None]] = []

    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.command, self.path, self.headers.get("Authorization")))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    (tmp_path / "summary.json").write_text(json.dumps({"name": "x", "capacity": {}, "levels": []}))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        push_summary(f"http://push%40user:sk-TRIALSECRET123@127.0.0.1:{port}/", tmp_path / "summary.json")
    finally:
        server.shutdown()
        server.server_close()
    expected = "Basic " + base64.b64encode(b"push@user:sk-TRIALSECRET123").decode()
    assert seen == [("PUT", "/metrics/job/loadtest/scenario/x", expected)]


_FUNCS = {"histogram_quantile", "sum", "by", "rate", "avg", "time", "le", "level", "outcome", "label_values",
          "scenario", "model_name", "quantile", "metric", "verdict"}


def _names_in(expr: str) -> set[str]:
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\{[^}]*\}", "{}", expr)  # matchers
    tokens = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    return {t for t in tokens if t not in _FUNCS and not t.startswith("$")}


def _mock_metric_names() -> set[str]:
    with MockServer(["--decode-base-ms", "10"]) as mock:
        with urllib.request.urlopen(mock.base_url.removesuffix("/v1") + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}


@pytest.mark.untimed
def test_every_dashboard_query_names_an_exported_or_mock_served_metric():
    dash = json.loads((ROOT / "deploy" / "grafana" / "loadtest.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    assert len(exprs) >= 10
    exported = set(METRIC_NAMES) | set(PUSHED_NAMES)
    exported |= {f"{h}{suffix}" for h in HISTOGRAMS for suffix in ("_bucket", "_sum", "_count")}
    served = _mock_metric_names()
    assert "vllm:num_requests_running" in served
    named = set().union(*map(_names_in, exprs))
    assert named <= exported | served, named - exported - served
    # The dashboard shows both sides: the load generator's and the server's own.
    assert named & {"loadtest_ttft_seconds_bucket", "loadtest_itl_seconds_bucket"} and named & served
    # And every pushed name is one the push really writes.
    written = {m.name for m in summary_registry({"name": "x", "capacity": {"concurrency": 1, "verdict": "exact"},
                                                  "levels": []}).collect()}
    assert {n for n in named if n in PUSHED_NAMES} <= written


# Not untimed: the master serves /metrics only while its one 8 s level runs, and the test must scrape it
# there after a worker's batch has arrived (a live scrape that catches a level while it runs, docs/testing.md).
# At the idle class this process and the run can each go seconds without a core, enough to miss the level.
def test_the_master_serves_the_metrics_of_every_workers_requests(tmp_path):
    """Distributed: the histograms are filled on the master from the batches the workers send."""
    from prometheus_client.parser import text_string_to_metric_families

    port = free_port()
    with MockServer(["--decode-base-ms", "10", "--prefill-per-token-ms", "0"]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, name="dist",
                                  load={"levels": [4], "level_duration_s": 8, "min_level_duration_s": 8, "warmup_s": 0.5})
        run = subprocess.Popen([sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(tmp_path / "run"),
                                "--workers", "2", "--metrics-port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        seen: dict[str, float] = {}
        try:
            deadline = time.monotonic() + 90
            while run.poll() is None and time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
                        text = resp.read().decode()
                except OSError:
                    time.sleep(0.3)
                    continue
                samples = {s.name: s for fam in text_string_to_metric_families(text) for s in fam.samples
                           if s.name in ("loadtest_ttft_seconds_count", "loadtest_users", "loadtest_level")}
                if "loadtest_ttft_seconds_count" in samples and samples["loadtest_users"].value == 4:
                    seen = {n: s.value for n, s in samples.items()}
                    break
                time.sleep(0.3)
            _, stderr = run.communicate(timeout=120)
        finally:
            reap(run)
    assert run.returncode == 0, stderr
    assert seen.get("loadtest_ttft_seconds_count", 0) > 0 and seen["loadtest_level"] == 4, seen
    records = pq_rows(tmp_path / "run")
    assert set(records["worker"]) - {"local"} and len(set(records["worker"])) == 2  # both workers' requests


def pq_rows(run_dir: Path):
    from loadtest.records import read_requests

    return read_requests(run_dir)


@pytest.mark.untimed
def test_a_taken_metrics_port_is_refused_before_any_load(tmp_path):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        scenario = write_scenario(tmp_path, "http://127.0.0.1:9/v1")
        done = subprocess.run([sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(tmp_path / "run"),
                               "--metrics-port", str(port)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"--metrics-port {port}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()  # refused before the run folder, the preflight or any load
