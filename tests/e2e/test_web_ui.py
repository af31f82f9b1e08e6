"""``loadtest run --web``: Locust's web UI drives a real run, checked with real HTTP requests.

The run is started and stopped through the UI's own endpoints (``POST /swarm``,
``POST /stop``), exactly what its Start and Stop buttons send; the stop must
take the Ctrl-C path: exit 130, every record kept, analysis and report done.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from loadtest.mock.process import MockServer
from loadtest.records import read_requests, read_run_json
from support.runkit import write_scenario


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _post(url: str, data: bytes = b"") -> dict:
    req = urllib.request.Request(url, data=data, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def _wait(predicate, what: str, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (OSError, urllib.error.URLError):
            value = None
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _kill_if_running(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def _assert_interrupted_cleanly(proc: subprocess.Popen, stderr: str) -> None:
    """A stop through the UI is Ctrl-C's path: exit 130, no traceback."""
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr


def _charts_draw_in_a_browser(url: str, tmp_path: Path) -> None:
    """The charts page in a real Chromium: no console error, each chart drew its traces and SLO lines."""
    from support.browser import PLOTS_JS, Chromium, find_chromium

    binary = find_chromium()
    if binary is None:
        return  # tests/e2e/test_report_browser.py says how to install it; the HTTP checks above still ran
    with Chromium(binary, offline=False) as chromium:
        page = chromium.open(url, settle_s=3.0)  # the page polls the data endpoint every 2 s
        plots = chromium.evaluate(PLOTS_JS)
        chromium.screenshot(tmp_path / "charts.png")
    assert page.console_errors == [] and page.exceptions == [] and page.outside_requests == []
    assert len(plots) == 2, plots  # TTFT and ITL
    for plot in plots:
        assert plot["with_data"] >= 4 and plot["traces_with_paths"] >= plot["with_data"], plot  # p50/p95/p99 + SLO


def _rate_level_is_plotted_at_its_rate(url: str, rate: float) -> None:
    """In a real Chromium: the TTFT chart's percentile traces start at the first level's rate (the next
    level offers twice it), on a rate axis."""
    from support.browser import Chromium, find_chromium

    binary = find_chromium()
    if binary is None:
        return  # tests/e2e/test_report_browser.py says how to install it; the HTTP checks still ran
    with Chromium(binary, offline=False) as chromium:
        page = chromium.open(url, settle_s=3.0)  # the page polls the data endpoint every 2 s
        drawn = chromium.evaluate(
            "(() => { const p = document.getElementById('ttft_ms');"
            " return {x: p.data.filter(t => /^p\\d+$/.test(t.name)).map(t => t.x),"
            " title: p.layout.xaxis.title.text}; })()")
    assert page.console_errors == [] and page.exceptions == []
    # the finished levels so far: the first, and the second too if the page drew after it (a busy host)
    assert drawn["x"] and all(xs and xs[0] == rate and set(xs) <= {rate, 2 * rate} for xs in drawn["x"]), drawn
    assert drawn["title"] == "offered rate (requests/s)", drawn


def _levels(base: str) -> dict:
    return json.loads(_get(f"{base}/loadtest/levels")[1])


@pytest.mark.browser  # the page is also drawn in Chromium (skipped without it; the HTTP checks still run)
@pytest.mark.parametrize("workers", [0, 1], ids=["local", "workers"])
def test_web_ui_starts_shows_levels_and_stops_like_ctrl_c(tmp_path: Path, workers: int):
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    out = tmp_path / "run"
    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "5"]) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url,
            load={"levels": [1, 2, 4, 8, 16], "level_duration_s": 3, "warmup_s": 0.5},
            slo={"ttft_ms": {"p95": 800}, "itl_ms": {"p95": 300}},
        )
        cmd = [sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(out),
               "--web", "--web-port", str(port), "--web-linger", "60"]
        if workers:
            cmd += ["--workers", str(workers)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        try:
            # Locust's own UI page is served, with our Levels tab among its template args.
            status, page = _wait(lambda: (lambda r: r if r[0] == 200 else None)(_get(f"{base}/")), "the web UI")
            assert b"window.templateArgs" in page and b"loadtest-levels" in page
            stats = json.loads(_get(f"{base}/stats/requests")[1])
            assert stats["state"] == "ready"  # nothing runs before Start
            assert stats["extended_stats"][0]["key"] == "loadtest-levels"
            waiting = _levels(base)
            assert waiting["phase"] == "waiting" and waiting["levels"] == [] and waiting["next"] == "1 user"
            assert waiting["slo"] == {"ttft_ms": {"p95": 800.0}, "itl_ms": {"p95": 300.0}}

            started = _post(f"{base}/swarm", b"user_count=1&spawn_rate=1")
            assert started["success"] is True
            assert _post(f"{base}/swarm", b"")["success"] is False  # a second Start changes nothing

            # The levels finished so far come back with their percentiles; the one in force and the next are named.
            data = _wait(lambda: (lambda d: d if sum(l["finished"] for l in d["levels"]) >= 2 else None)(_levels(base)),
                         "two finished levels")
            finished = [l for l in data["levels"] if l["finished"]]
            assert [l["concurrency"] for l in finished[:2]] == [1, 2]
            for level in finished:
                assert level["requests"] > 0 and level["verdict"] in ("pass", "fail", "uncertain")
                assert 0 < level["ttft_ms"]["p50"] <= level["ttft_ms"]["p95"] <= level["ttft_ms"]["p99"]
                assert 0 < level["itl_ms"]["p50"] <= level["itl_ms"]["p95"]
            if data["current"] is not None:
                assert data["current"]["status"] == "running"
                planned = [1, 2, 4, 8, 16]
                after = planned.index(data["current"]["concurrency"]) + 1
                # without --refine nothing follows the last planned level (it read "refine probes, if --refine")
                assert data["next"] == (f"{planned[after]} users" if after < len(planned) else None)
            stats = json.loads(_get(f"{base}/stats/requests")[1])
            assert stats["state"] in ("running", "spawning") and stats["stats"][-1]["num_requests"] > 0
            rows = stats["extended_stats"][0]["data"]
            assert rows[0]["load"] == "1 user" and rows[0]["status"].startswith("done")
            charts_status, charts = _get(f"{base}/loadtest/charts")
            assert charts_status == 200 and b"Plotly.react" in charts
            assert _get(f"{base}/loadtest/plotly.js")[0] == 200
            if workers == 0:
                _charts_draw_in_a_browser(f"{base}/loadtest/charts", tmp_path)
            assert _get(f"{base}/loadtest/report")[0] == 404  # not written yet

            # Stop through the UI: the Ctrl-C path. The UI lingers with the report link.
            assert _post(f"{base}/stop")["success"] is True
            done = _wait(lambda: (lambda d: d if d["phase"] == "done" else None)(_levels(base)), "the report", timeout=120)
            assert done["report"] == "./loadtest/report" and done["verdict"]
            assert done["current"] is None and done["next"] is None
            report_status, report = _get(f"{base}/loadtest/report")
            assert report_status == 200 and b"plotly" in report.lower()
            _post(f"{base}/stop")  # a Stop after the run closes the UI
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            _kill_if_running(proc)
    _assert_interrupted_cleanly(proc, stderr)
    assert "web UI: http://127.0.0.1:" in stderr
    for name in ("run.json", "requests.parquet", "summary.json", "report.html"):
        assert (out / name).is_file(), name
    run = read_run_json(out)
    assert run["complete"] is False and len(run["levels"]) >= 2
    frame = read_requests(out)
    assert len(frame) >= sum(l["requests"] for l in finished)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["levels"][0]["concurrency"] == 1


# Untimed: labels, the order of levels and the exit code; whichever level is in force when it is read,
# the first one's label is the same, and every wait is generous.
@pytest.mark.untimed
@pytest.mark.browser  # the charts page is also drawn in Chromium (skipped without it; the HTTP checks still run)
def test_an_open_loop_levels_are_named_by_their_rate_as_on_the_terminal(tmp_path: Path):
    """An open-loop level has no users of its own (its span's concurrency is 0): the Levels tab said
    "Users 0" for each. It names each level as the terminal does (live.level_label): ``2 req/s``."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with MockServer(["--decode-base-ms", "10"]) as mock:
        # The Stop below must come while the second level runs: were the run to end on its own first,
        # that Stop would close the UI before the "done" it waits for. At the idle class beside the timing
        # tests this process and the run can each go seconds without a core, so: an ITL limit no starved
        # host misses (a certain failure at 2 req/s would end the sweep with the first level) and no TTFT
        # objective (its 20-request looks keep nothing here), and 8 s levels that never end early
        # (min_level_duration_s), which leave 8 s between the first level's end and the second's.
        scenario = write_scenario(
            tmp_path, mock.base_url, target={"timeout_s": 60},
            load={"levels": None, "rates": [2, 4], "arrival": "constant", "max_in_flight": 8,  # no closed-loop default
                  "level_duration_s": 8, "min_level_duration_s": 8, "warmup_s": 0.5},
            slo={"ttft_ms": {}, "itl_ms": {"p95": 60000}},
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(tmp_path / "run"),
             "--web", "--web-port", str(port), "--web-linger", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        try:
            _wait(lambda: proc.poll() is not None or _get(f"{base}/")[0] == 200, "the web UI")
            assert proc.poll() is None, proc.communicate()[1]  # a refused scenario says why here, not as a timeout
            waiting = _levels(base)
            assert waiting["planned"] == [2.0, 4.0] and waiting["next"] == "2 req/s", waiting
            started = _post(f"{base}/swarm", b"user_count=1&spawn_rate=1")
            assert started["success"] is True and "rates 2, 4 req/s" in started["message"], started
            data = _wait(lambda: (lambda d: d if d["levels"] else None)(_levels(base)), "the first level")
            first = data["levels"][0]
            assert (first["label"], first["rate_rps"], first["concurrency"]) == ("2 req/s", 2.0, 0), first
            rows = json.loads(_get(f"{base}/stats/requests")[1])["extended_stats"][0]["data"]
            assert rows[0]["load"] == "2 req/s", rows
            assert all(row.get("load") not in (0, "0", "0 users") for row in rows), rows
            nxt = [row["load"] for row in rows if row["level"] == "next"]
            assert nxt in ([], ["4 req/s"]), rows
            # stopped once a level has finished (the run would end on its own otherwise: then the Stop
            # below would close the UI); the UI then lingers with the finished levels for the charts
            _wait(lambda: any(lv["finished"] for lv in _levels(base)["levels"]), "the first level's end", timeout=60)
            assert _post(f"{base}/stop")["success"] is True
            _wait(lambda: _levels(base)["phase"] == "done", "the report", timeout=120)
            # the charts plot a finished rate level at its rate, not at 0 users (off a log axis, so nothing drew)
            _rate_level_is_plotted_at_its_rate(f"{base}/loadtest/charts", rate=2.0)
            _post(f"{base}/stop")  # a Stop after the run closes the UI
            _, stderr = proc.communicate(timeout=60)
        finally:
            _kill_if_running(proc)
    _assert_interrupted_cleanly(proc, stderr)
    assert "level 1 (2 req/s)" in stderr  # the terminal's name for the same level


@pytest.mark.untimed
def test_stop_before_start_ends_the_run_with_nothing_measured(tmp_path: Path):
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    out = tmp_path / "run"
    with MockServer([]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url)
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(out), "--web", "--web-port", str(port),
             "--web-linger", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        try:
            _wait(lambda: _get(f"{base}/")[0] == 200, "the web UI")
            _post(f"{base}/stop")
            _, stderr = proc.communicate(timeout=90)
        finally:
            _kill_if_running(proc)
    _assert_interrupted_cleanly(proc, stderr)
    assert read_run_json(out)["levels"] == []
    assert (out / "summary.json").is_file()


@pytest.mark.untimed
def test_a_busy_web_port_is_one_line_and_exit_2(tmp_path: Path):
    with socket.socket() as busy, MockServer([]) as mock:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        scenario = write_scenario(tmp_path, mock.base_url)
        proc = subprocess.run(
            [sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(tmp_path / "run"),
             "--web", "--web-port", str(busy.getsockname()[1])],
            capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 2, proc.stderr
    assert "--web-port" in proc.stderr and "Traceback" not in proc.stderr
