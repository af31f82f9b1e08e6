"""Command-line mistakes that reached a socket, a Locust master or a memory error: one line, exit 2.

Each case runs the real ``loadtest`` command. Every one of them used to end in a
traceback (``--web-port 99999``: OverflowError; a taken ``--master-bind-port``:
Locust's RPCError; ``mock --tls-cert`` on a file that is not PEM: SSLError;
``trace synth --rate 1e9 --duration-s 1e9``: MemoryError), or in something worse
than one (``mock --prefix-cache-block-tokens 0`` served a 500 to every request;
``--levels 1,,2`` ran the sweep 1,2). argparse's own mistakes are one line too,
without the twenty-line usage block before them.
"""

from __future__ import annotations

import argparse

import json
import socket
from pathlib import Path

import pytest

from support.runkit import loadtest, write_scenario

#: asserts nothing about time (exit codes and messages, no clock): runs in make test's parallel pass
pytestmark = pytest.mark.untimed


@pytest.fixture(scope="module")
def taken_port():
    """A port something listens on (nothing is ever sent to it)."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Path:
    # port 9 (discard): a run that got past its arguments would fail its preflight, never send load
    return write_scenario(tmp_path_factory.mktemp("args"), "http://127.0.0.1:9/v1")


CASES = [
    (["--metrics-port", "99999"], "--metrics-port", "a port is 1 to 65535"),
    (["--web", "--web-port", "99999"], "--web-port", "a port is 1 to 65535"),
    (["--master", "--master-bind-port", "0"], "--master-bind-port", "a port is 1 to 65535"),
    (["--master", "--master-bind-port", "{taken}"], "--master-bind-port {taken}", "address already in use"),
    (["--workers", "-3"], "--workers -3", "-1 for one per core"),
    (["--workers", "0"], "--workers 0", "a positive number of local worker processes"),  # ran in one process
    # far more than any machine's cores: spawned processes for seconds (51 in 15 s on 2 cores), no word
    (["--workers", "100000"], "--workers 100000", "more workers than cores cannot add load"),
    (["--expect-workers", "4"], "--expect-workers", "only with --master"),
    (["--levels", "1,,2"], "--levels", "expected comma-separated levels"),
    (["--levels", "4,2"], "--levels", "must rise from one level to the next"),
    (["--rates", "1,nan"], "--rates", "must be positive"),
    (["--level-duration", "inf"], "--level-duration", "expected a finite number"),
    (["--traffic-growth", "inf"], "--traffic-growth", "expected a fraction"),  # said "write inf%"
    (["--levels", "1,4,200000"], "--levels", "must be at most 100000; got 200000"),  # the scenario's bound
    (["--rates", "1,1e9"], "--rates", "must be at most 100000; got 1e+09"),
    (["--repeat", "0"], "--repeat 0", "expected 1 to 50 runs"),
    (["--min-history", "0"], "--min-history", "at least 2 runs"),  # was checked after the run's load
    (["--model", ""], "--model", "must not be empty"),  # was sent, and the server's 400 ended the run (exit 3)
    # the push comes after the run: a URL that could never work was found only then
    (["--pushgateway", "notaurl"], "--pushgateway: 'notaurl'", "expected http(s)://"),
    (["--pushgateway", "http://u:sk-TRIALSECRET123@127.0.0.1:99999/"],
     "--pushgateway: 'http://<redacted>:<redacted>@127.0.0.1:99999/'", "port out of range"),
    (["--pushgateway", "http://h:0/"], "--pushgateway: 'http://h:0/'", "port 0"),
    # flags that did nothing, without a word (a trial waited for a web UI that --web-linger alone never started)
    (["--web-linger", "5"], "--web-linger", "only with --web"),
    (["--web-port", "9000"], "--web-port", "only with --web"),
    (["--rate-resolution", "0.5"], "--rate-resolution 0.5", "only with --refine"),
    (["--refine", "--rate-resolution", "0.5"], "--rate-resolution 0.5", "only in open loop or trace replay"),
    # two of the run's listeners on one port: the web UI failed to bind after the warm-up's traffic
    (["--web", "--web-port", "{taken}", "--metrics-port", "{taken}"], "--web-port {taken} and --metrics-port {taken}",
     "the same port for two listeners"),
]


@pytest.mark.parametrize("extra, names, says", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_run_argument_mistake_is_one_line_before_any_load(scenario, taken_port, tmp_path, extra, names, says):
    extra = [a.format(taken=taken_port) for a in extra]
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), *extra, timeout=60)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert names.format(taken=taken_port) in lines[0] and says in lines[0].lower(), lines[0]
    assert not (tmp_path / "run").exists()  # refused before the run folder was made


def test_mock_and_trace_mistakes_are_one_line(tmp_path):
    not_pem = tmp_path / "cert.pem"
    not_pem.write_text("not a certificate\n")
    cases = [
        (["mock", "--port", "0", "--tls-cert", str(not_pem), "--tls-key", str(not_pem)],
         f"--tls-cert {not_pem}", "not a pem certificate"),
        (["mock", "--port", "0", "--prefix-cache-block-tokens", "0"], "--prefix-cache-block-tokens", "at least 1"),
        (["mock", "--port", "x"], "--port", "invalid int value"),
        (["trace", "synth", str(tmp_path / "t.jsonl"), "--rate", "1e9", "--duration-s", "1e9"],
         "--rate 1e+09", "at most 5,000,000"),
    ]
    for argv, names, says in cases:
        result = loadtest(*argv, timeout=30)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2, (argv, result.stderr)
        assert len(lines) == 1 and "Traceback" not in result.stderr, (argv, result.stderr)
        assert names in lines[0] and says in lines[0].lower(), (argv, lines[0])
    assert not (tmp_path / "t.jsonl").exists()


def test_a_run_that_stops_at_its_preflight_says_so_in_its_folder(scenario, tmp_path):
    """Such a folder read as a killed run to analyze and as a no-data run in history."""
    run = tmp_path / "runs" / "night"
    result = loadtest("run", str(scenario), "--out", str(run), timeout=60)
    assert result.returncode == 3, result.stderr  # the target is unusable
    record = json.loads((run / "run.json").read_text())
    assert record["stopped_by"] == "preflight" and "cannot connect" in record["stop_error"]
    analyzed = loadtest("analyze", str(run), timeout=60)
    assert analyzed.returncode == 2 and "stopped at its preflight" in analyzed.stderr
    assert "Traceback" not in analyzed.stderr and not (run / "summary.json").exists()
    history = loadtest("history", str(tmp_path / "runs"), "--html", str(tmp_path / "h.html"), timeout=60)
    assert f"skipped {run}: the run stopped at its preflight" in history.stderr, history.stderr


def test_k8s_render_refuses_settings_a_pod_could_not_use(scenario):
    """A --target that is not a URL, or --results outside a bucket (lost with the pod), rendered anyway."""
    for extra, says in [(["--target", "notaurl"], "--target 'notaurl': expected the server's http"),
                        (["--results", "/data/runs"], "--results '/data/runs': expected s3://"),
                        (["--target", "http://[::1"], "--target 'http://[::1': expected the server's http"),
                        (["--target", "http://h:port/v1"], "--target 'http://h:port/v1': expected"),
                        (["--schedule", "nightly"], "--schedule 'nightly': expected a cron line")]:
        result = loadtest("k8s", "render", str(scenario), *extra, timeout=60)
        assert result.returncode == 2 and says in result.stderr and not result.stdout, (extra, result.stderr)
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert loadtest("k8s", "render", str(scenario), "--results", "s3://b/runs/", timeout=60).returncode == 0
    # without the "/" the master Job's --out would be the prefix itself (the folder holding baseline/
    # and the nights), not a new run folder under it: the prefix is rendered with its "/"
    bare = loadtest("k8s", "render", str(scenario), "--results", "s3://b/runs", timeout=60)
    assert bare.returncode == 0 and "RESULTS_URL: s3://b/runs/" in bare.stdout, bare.stdout[:2000]


def test_the_port_probe_binds_as_the_listeners_do(taken_port):
    """The probe before a run refuses a taken port, and only that: IPv6 hosts and interface names pass."""
    from loadtest.errors import InputError
    from loadtest.export.flags import check_port_free

    with pytest.raises(InputError, match=f"--web-port {taken_port}: cannot listen on 127.0.0.1:{taken_port}"):
        check_port_free("--web-port", "127.0.0.1", taken_port)
    # ZeroMQ's --master-bind-host takes an interface name: left to the listener, not refused here
    check_port_free("--master-bind-port", "eth0", taken_port, interface_names=True)
    with pytest.raises(InputError, match="--web-port"):
        check_port_free("--web-port", "no-such-host.invalid", 8089)
    if not socket.has_ipv6:
        return
    try:
        v6 = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        return  # no IPv6 loopback on this machine: the IPv4 cases above still ran
    with v6:
        port = v6.getsockname()[1]
        with pytest.raises(InputError, match=rf"cannot listen on \[::1\]:{port}"):
            check_port_free("--web-port", "::1", port)
    check_port_free("--web-port", "::1", port)  # free again: an IPv6 host is probed as IPv6, not refused


def test_a_bad_metrics_port_from_the_environment_names_the_variable(scenario, tmp_path):
    """A CronJob sets $LOADTEST_METRICS_PORT, not the flag: the line said only "--metrics-port"."""
    import os

    env = {**os.environ, "LOADTEST_METRICS_PORT": "abc"}
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), env=env, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--metrics-port" in result.stderr and "$LOADTEST_METRICS_PORT" in result.stderr, result.stderr
    given = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), "--metrics-port", "abc", timeout=60)
    assert given.returncode == 2 and "$LOADTEST_METRICS_PORT" not in given.stderr, given.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("variable, where", [("LT_KEY", "target.api_key_env"), ("LT_HDR", "target.headers_env.api-key")])
def test_a_secret_variable_with_a_newline_is_refused_before_any_request(tmp_path, variable, where):
    """A key saved with its newline failed the preflight's header (exit 3), and the error printed the header."""
    import os

    path = write_scenario(tmp_path, "http://127.0.0.1:9/v1",
                          target={"api_key_env": "LT_KEY", "headers_env": {"api-key": "LT_HDR"}})
    env = {**os.environ, "LT_KEY": "sk-TRIALSECRET123", "LT_HDR": "hdrTRIALSECRET456"}
    env[variable] += "\n"
    for argv in (["run", str(path), "--out", str(tmp_path / "run")], ["worker", str(path), "--master-timeout", "1"]):
        result = loadtest(*argv, env=env, timeout=60)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, (argv[0], result.stderr)
        assert f"${variable} ({where}) holds a control character (a newline at the end)" in lines[0], lines[0]
        assert "TRIALSECRET" not in result.stderr + result.stdout
    assert not (tmp_path / "run").exists()  # refused before the run folder, so before any request


def test_a_bad_pushgateway_from_the_environment_names_the_variable(scenario, tmp_path):
    import os

    env = {**os.environ, "LOADTEST_PUSHGATEWAY": "pushgateway:99999"}
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), env=env, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--pushgateway: 'http://pushgateway:99999'" in result.stderr and "$LOADTEST_PUSHGATEWAY" in result.stderr, result.stderr
    assert not (tmp_path / "run").exists()


def test_a_pushgateway_given_as_host_and_port_is_still_taken():
    """``pushgateway:9091`` (a Service name and port, as prometheus_client reads it) always worked; it
    still does, as plain http, while a bare word without a port stays a refused typo."""
    from loadtest.export.flags import pushgateway_url

    assert pushgateway_url("pushgateway:9091") == "http://pushgateway:9091"
    assert pushgateway_url("u:pw@gw:9091") == "http://u:pw@gw:9091"
    assert pushgateway_url("https://gw/") == "https://gw/"
    with pytest.raises(argparse.ArgumentTypeError, match="'notaurl': expected"):
        pushgateway_url("notaurl")


def test_local_workers_past_the_cores_warn_then_are_refused():
    """The bound is the machine's: a few past the cores is a warning, past 4 per core a mistake."""
    from loadtest.errors import InputError
    from loadtest.load.cores import check_local_workers

    assert check_local_workers(2, cores=2) is None and check_local_workers(-1, cores=2) is None
    assert "--workers 3 on 2 cores" in check_local_workers(3, cores=2)
    assert check_local_workers(8, cores=2) is not None  # 4 × cores: still allowed
    with pytest.raises(InputError, match=r"--workers 9: this machine has 2 cores.*at most 8"):
        check_local_workers(9, cores=2)
