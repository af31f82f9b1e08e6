"""``loadtest run`` end to end: real Locust, real mock server, real files."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time

import numpy as np
import pytest

from loadtest.mock.process import MockServer
from loadtest.records import read_requests, read_run_json
from support.procs import communicate_or_dump, free_port, reap
from support.runkit import level_rows, loadtest, start_run, summary, wait_for_flushes, write_scenario


@pytest.fixture(scope="module")
def formula_run(tmp_path_factory):
    """One short run (3 levels x 4 s) against a mock whose timings are known."""
    folder = tmp_path_factory.mktemp("formula")
    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "20", "--prefill-per-token-ms", "0"]) as mock:
        scenario = write_scenario(folder, mock.base_url)
        out = folder / "run"
        result = loadtest("run", str(scenario), "--out", str(out))
        seen = mock.requests_by_status()
        # How late the mock's own steps ran (CPU contention on a shared machine): the formula
        # holds for an on-time engine, so the TTFT bounds below allow for what it reports.
        late_ms = 1000.0 * mock.metrics()["loadtest_mock_step_late_seconds_max"]
    return result, out, seen, late_ms


def test_short_run_writes_a_complete_folder(formula_run):
    result, out, _, _ = formula_run
    assert result.returncode == 0, result.stderr
    for name in ("run.json", "requests.parquet", "locust.log", "summary.json", "report.html"):
        assert (out / name).is_file(), name
    assert not (out / "requests.parts").exists()
    run = read_run_json(out)
    assert run["complete"] is True
    assert [lv["concurrency"] for lv in run["levels"]] == [1, 2, 4]
    for lv in run["levels"]:
        assert lv["end_wall"] > lv["start_wall"]
        assert {"loop_lag_p99_ms", "cpu_pct", "saturated"} <= set(lv["client"])
    assert run["preflight"]["token_source"] == "continuous_usage"
    # Locust's own log goes to the file, not the screen.
    assert "Shape" in (out / "locust.log").read_text()
    assert "Shape test" not in result.stderr


def test_every_request_the_mock_saw_is_a_record(formula_run):
    _, out, seen, _ = formula_run
    frame = read_requests(out)
    # The mock also saw the one preflight request (warmup_requests is 0 here).
    assert len(frame) == sum(seen.values()) - 1
    assert set(frame.level) == {1, 2, 4}
    assert frame.request_id.is_unique


def test_per_level_itl_and_ttft_match_the_mock_formula(formula_run):
    _, out, _, late_ms = formula_run
    frame = read_requests(out)
    levels = read_run_json(out)["levels"]
    ends = {lv["concurrency"]: lv["end_wall"] for lv in levels}
    following = {lv["concurrency"]: nxt["concurrency"] for lv, nxt in zip(levels, levels[1:])}
    for users in (1, 2, 4):
        rows = level_rows(frame, users)
        assert len(rows) >= 3, users
        step = 10 + 20 * users  # decode_base_ms + decode_per_seq_ms x running
        gaps = np.concatenate([np.diff(np.asarray(c)) for c in rows.chunk_ms])
        assert abs(np.median(gaps) - step) <= 3, (users, np.median(gaps))
        # The first token comes at the end of the step that admits the request:
        # one step, plus the wait for the step in progress to end (at most one more).
        # A request still waiting for it when its level ended may share those steps
        # with the next level's users, whose batch is larger and whose steps are longer.
        ttft = rows.ttft_ms.to_numpy()
        first_token_wall = rows.start_wall.to_numpy() + ttft / 1000.0
        batch = np.where(first_token_wall > ends[users], following.get(users, users), users)
        longest_step = 10 + 20 * batch
        # Two steps may each run late by up to the mock's worst lateness.
        assert np.all(ttft >= step - 3) and np.all(ttft <= 2 * longest_step + 10 + 2 * late_ms), (users, ttft, late_ms)
        assert (rows.token_source == "continuous_usage").all()
        assert (rows.completion_tokens == 16).all()
        assert all(len(c) == 16 for c in rows.chunk_ms)


def test_summary_reports_the_levels(formula_run):
    _, out, _, _ = formula_run
    s = summary(out)
    assert [lv["concurrency"] for lv in s["levels"]] == [1, 2, 4]
    itl = {lv["concurrency"]: lv["itl_ms"]["p50"] for lv in s["levels"]}
    assert abs(itl[4] - 90) <= 3 and abs(itl[1] - 30) <= 3


@pytest.mark.solo
def test_gaps_at_20_streams_match_the_server_within_2ms(tmp_path):
    """At 20 concurrent streams and a 20 ms step, the client must not bunch chunks."""
    with MockServer(["--decode-base-ms", "20", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0"]) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url,
            workload={"max_tokens": 40},
            load={"levels": [20], "level_duration_s": 5, "warmup_s": 1},
        )
        result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    rows = level_rows(read_requests(tmp_path / "run"), 20)
    gaps = np.concatenate([np.diff(np.asarray(c)) for c in rows.chunk_ms])
    assert len(gaps) > 1000
    assert abs(np.median(gaps) - 20) <= 2, np.median(gaps)
    # Bunched chunks would show up as near-zero gaps.
    assert np.percentile(gaps, 5) > 10, np.percentile(gaps, 5)


@contextlib.contextmanager
def run_in_background(tmp_path):
    """A 40 s run against the mock, once it has flushed a few batches; killed if still alive at the end."""
    with MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "0"]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, load={"levels": [2, 4], "level_duration_s": 20})
        out = tmp_path / "run"
        proc = start_run(scenario, out)
        try:
            wait_for_flushes(out, 3)
            yield proc, out
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)


@pytest.mark.untimed
def test_killed_run_keeps_what_it_measured(tmp_path):
    with run_in_background(tmp_path) as (proc, out):
        proc.send_signal(signal.SIGKILL)
        # communicate ends when the pipes do: the orphaned children (the sink, the judge, the nice-19
        # scraper) hold them until they have written what they have and exited, which a busy neighbour
        # stretched past 10 s (seen beside a CPU hog). They must be gone before the folder is read.
        proc.communicate(timeout=60)
    frame = read_requests(out)
    assert len(frame) > 10
    assert read_run_json(out)["levels"][0]["concurrency"] == 2
    # And the saved run can still be analyzed.
    result = loadtest("analyze", str(out))
    assert result.returncode == 0, result.stderr
    assert (out / "summary.json").is_file()


@pytest.mark.untimed
def test_api_key_never_reaches_the_run_folder(tmp_path):
    secret = "sk-test-SECRET-4242"
    env = {**os.environ, "MY_TEST_KEY": secret}
    with MockServer(["--api-key", secret, "--decode-base-ms", "5", "--decode-per-seq-ms", "0"]) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url,
            target={"api_key_env": "MY_TEST_KEY", "headers": {"X-Api-Key": secret}},
            load={"levels": [1, 2], "level_duration_s": 2, "warmup_s": 0.5},
        )
        result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), env=env)
        assert result.returncode == 0, result.stderr
        # Without the key the mock says 401, and the run stops before any level (exit 3).
        env.pop("MY_TEST_KEY")
        refused = loadtest("run", str(scenario), "--out", str(tmp_path / "refused"), env=env)
    assert refused.returncode == 3
    assert "401" in refused.stderr and "MY_TEST_KEY" in refused.stderr
    assert "Traceback" not in refused.stderr
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert len(files) >= 5
    for path in files:
        assert secret.encode() not in path.read_bytes(), path


@pytest.mark.untimed
def test_unreachable_target_exits_3_before_any_level(tmp_path):
    scenario = write_scenario(tmp_path, "http://127.0.0.1:9/v1")
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"))
    assert result.returncode == 3
    lines = result.stderr.strip().splitlines()
    assert "cannot reach http://127.0.0.1:9/v1/chat/completions" in lines[-1]
    assert "Traceback" not in result.stderr
    assert read_run_json(tmp_path / "run")["levels"] == []


@pytest.mark.untimed
def test_a_target_with_userinfo_and_a_query_is_named_by_the_url_requested(tmp_path):
    """The line read ``…/v1?api_key=<redacted>/chat/completions``: the path pasted after the query."""
    scenario = write_scenario(tmp_path, "http://u:pw-TRIALSECRET@127.0.0.1:9/v1?api_key=sk-TRIALSECRET123",
                              target={"query": {"api-version": "2024-10-21"}})
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"))
    assert result.returncode == 3, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert ("cannot reach http://<redacted>:<redacted>@127.0.0.1:9/v1/chat/completions"
            "?api_key=<redacted>&api-version=2024-10-21: ") in line, line
    assert "TRIALSECRET" not in result.stderr + result.stdout


@pytest.mark.untimed
def test_a_base_urls_query_is_sent_after_the_path(tmp_path):
    """What the mock received: the base URL's query, then target.query, after /v1/chat/completions."""
    log = tmp_path / "requests.log"
    with MockServer(["--decode-base-ms", "1", "--decode-per-seq-ms", "0", "--request-log", str(log)]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url + "?api_key=sk-TRIALSECRET123", target={"query": {"team": "perf"}},
                                  load={"levels": [1], "level_duration_s": 1, "warmup_s": 0.2})
        result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), timeout=120)
    assert result.returncode == 0, result.stderr
    paths = {json.loads(line)["path"] for line in log.read_text().splitlines()}
    assert paths == {"/v1/chat/completions?api_key=sk-TRIALSECRET123&team=perf"}, paths


@pytest.mark.untimed
def test_wrong_path_gives_404_hint(tmp_path):
    with MockServer([]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url.removesuffix("/v1") + "/nope")
        result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"))
    assert result.returncode == 3
    assert "404" in result.stderr and "base_url" in result.stderr


@pytest.mark.untimed
def test_a_saturated_client_is_flagged_and_the_verdict_says_so(tmp_path):
    """Limits no process can meet (CPU <= 0.001%) mark every level: the mechanism, end to end."""
    with MockServer(["--decode-base-ms", "5", "--decode-per-seq-ms", "0"]) as mock:
        scenario = write_scenario(
            tmp_path, mock.base_url,
            load={"levels": [1, 2], "level_duration_s": 2, "warmup_s": 0.5,
                  "client_limits": {"loop_lag_p99_ms": 50, "reader_batch_p99_ms": 50, "cpu_pct": 0.001}},
        )
        result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    run = read_run_json(tmp_path / "run")
    for level in run["levels"]:
        assert level["client"]["saturated"] is True
        assert "CPU" in level["client"]["reason"]
        assert level["client"]["reader_batch_p99_ms"] >= 0 and level["client"]["loop_lag_p99_ms"] >= 0
    s = summary(tmp_path / "run")
    assert all(lv["client_saturated"] for lv in s["levels"])
    assert s["capacity"]["verdict"] == "client_saturated"
    advice = [w for w in s["warnings"] if "saturated" in w]
    assert advice and "--workers 2" in advice[0]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_during_the_preflight_is_one_line(tmp_path, signum):
    """A SIGINT while the preflight waits on a server that never answers is raised in gevent's hub,
    which printed ``KeyboardInterrupt`` and a timestamp before the CLI's own ``interrupted`` line.
    A SIGTERM then killed the run where it stood (exit 143, no line). Both are now the one line,
    exit 130, and run.json says which stopped it, so ``analyze`` and ``history`` give that
    reason, not "no records".

    Not ``untimed``: in the untimed pass the run twice did not stop within a minute of the signal,
    which was put down to the idle scheduling class. The likelier cause, found 2026-12-06 with the
    threads' stacks (the run's only thread idle in gevent's hub): the untimed pass is a background
    command of make's shell, which starts it with SIGINT ignored, and the run inherited that.
    ``start_run`` now gives the run SIGINT's default handling; the test stays paired."""
    arrivals = tmp_path / "arrivals.log"
    with MockServer(["--hang-rate", "1", "--arrival-log", str(arrivals)]) as mock:
        # the preflight must still be waiting when the signal comes, however slowly this test runs
        # beside others: a timeout longer than the wait for the arrival below (it gave exit 3 at 10 s)
        scenario = write_scenario(tmp_path, mock.base_url, load={"levels": [1], "level_duration_s": 2, "warmup_s": 0.5},
                                  target={"timeout_s": 120})
        proc = start_run(scenario, tmp_path / "run")
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (arrivals.exists() and arrivals.stat().st_size):  # preflight sent
                time.sleep(0.1)
            time.sleep(0.5)
            proc.send_signal(signum)
            stdout, stderr = communicate_or_dump(proc, 60)  # if the run is still there, its threads' stacks
        finally:
            reap(proc)
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("loadtest 0")]
    assert lines == ["loadtest run: interrupted"], stderr
    name = signal.Signals(signum).name
    run = read_run_json(tmp_path / "run")
    assert (run["stopped_by"], run["stop_signal"], run["complete"]) == ("signal", name, False), run
    analyzed = loadtest("analyze", str(tmp_path / "run"))
    assert analyzed.returncode == 2 and "stopped the run before its first level" in analyzed.stderr, analyzed.stderr
    assert name in analyzed.stderr and len(analyzed.stderr.strip().splitlines()) == 1, analyzed.stderr
    history = loadtest("history", str(tmp_path))
    assert f"skipped {tmp_path / 'run'}: " in history.stderr and name in history.stderr, history.stderr


def test_sigterm_while_the_master_waits_for_its_workers_is_recorded(tmp_path):
    """A review: after the warm-up, the wait for workers (pods slow to come) had no handler of its own
    before the load's, so a SIGTERM there killed the run (exit 143, no ``stopped_by``, the scraper child
    left). It is the pre-load stop now. Paired, like the preflight's: the signal must land in the wait."""
    port = str(free_port())
    with MockServer([]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, load={"levels": [1], "level_duration_s": 2, "warmup_s": 0.5})
        proc = start_run(scenario, tmp_path / "run", "--master", "--expect-workers", "1", "--master-bind-host",
                         "127.0.0.1", "--master-bind-port", port, "--worker-timeout", "120")
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not _listening(int(port)):  # the master is up: it waits
                time.sleep(0.1)
            time.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            _, stderr = communicate_or_dump(proc, 60)
        finally:
            reap(proc)
    assert proc.returncode == 130, stderr
    run = read_run_json(tmp_path / "run")
    assert (run["stopped_by"], run["stop_signal"], run["complete"]) == ("signal", "SIGTERM", False), run


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.untimed
def test_sigterm_stops_the_load_and_still_reports(tmp_path):
    with run_in_background(tmp_path) as (proc, out):
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "run interrupted" in stderr and "Traceback" not in stderr
    run = read_run_json(out)
    assert run["complete"] is False and run["ended_wall"] is not None
    # an interrupt, not a crash: run.json says who stopped it, and the warning says so without a question mark
    assert (run["stopped_by"], run["stop_signal"]) == ("signal", "SIGTERM")
    assert len(read_requests(out)) > 10
    assert (out / "summary.json").is_file() and (out / "report.html").is_file()
    s = summary(out)
    assert (s["run"]["stopped_by"], s["run"]["stop_signal"]) == ("signal", "SIGTERM")
    incomplete = [w for w in s["warnings"] if "did not complete" in w]
    assert incomplete and incomplete[0].startswith("the run did not complete: SIGTERM stopped it"), incomplete
