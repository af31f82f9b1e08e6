"""HTTPS targets (hosted APIs, private CAs): the same records over TLS.

The mock serves HTTPS with a throw-away self-signed certificate made by the
``openssl`` command (on every machine this project runs on).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from loadtest.client import tls_read
from loadtest.client.stream import StreamingClient
from loadtest.client.wire import build_body
from loadtest.mock.process import MockServer
from loadtest.mock.tls import self_signed_cert
from loadtest.records import read_requests
from support.runkit import level_rows, loadtest, write_scenario
from support.tunnel import pipe

pytestmark = pytest.mark.solo


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_mock(tls_files):
    cert, key = tls_files
    flags = ["--tls-cert", str(cert), "--tls-key", str(key), "--decode-base-ms", "10", "--decode-per-seq-ms", "0"]
    with MockServer(flags) as mock:
        assert mock.base_url.startswith("https://")
        yield mock


@pytest.mark.parametrize("reads", ["reactor", "greenlets"])
@pytest.mark.parametrize("options", ["ca_bundle", "insecure"])
def test_tls_stream_is_timed_per_chunk(tls_mock, tls_files, options, reads, monkeypatch):
    """Both TLS readers (LOADTEST_TLS_READS): the reactor thread (the default) and the user's greenlet."""
    monkeypatch.setattr(tls_read, "READS", reads)
    kwargs = {"ca_bundle": str(tls_files[0])} if options == "ca_bundle" else {"insecure": True}
    client = StreamingClient(tls_mock.base_url, "chat", **kwargs)
    assert client.use_reactor == (reads == "reactor")
    # (pytest's process is not gevent-patched, so a verifying context is the standard library's and
    # its blocking sockets stay with the greenlet; `loadtest run`'s are gevent's: test_run_over_tls_…)
    records = [client.send(build_body("chat", "mock-model", "hi", 12, continuous_usage=True)) for _ in range(3)]
    new_connections = client._connections.count
    client.close()
    for rec in records:  # three on one keep-alive connection: the reader leaves the TLS session usable
        assert rec.ok, rec.error
        assert len(rec.chunk_ms) == 12 and rec.token_source == "continuous_usage"
        assert abs(np.median(np.diff(np.asarray(rec.chunk_ms))) - 10) < 1.5
    assert new_connections == 1


@pytest.mark.untimed
def test_a_tls_stream_cut_mid_answer_is_a_failure_on_the_reactor(tls_files):
    """The server closes mid-stream (no close_notify, as most do): a failed record, never a hang."""
    cert, key = tls_files
    flags = ["--tls-cert", str(cert), "--tls-key", str(key), "--decode-base-ms", "2", "--drop-rate", "1"]
    with MockServer(flags) as mock:
        client = StreamingClient(mock.base_url, "chat", insecure=True, timeout_s=20)
        assert client.use_reactor
        rec = client.send(build_body("chat", "mock-model", "hi", 50))
        client.close()
    assert not rec.ok and rec.error_kind in ("disconnect", "malformed"), (rec.error_kind, rec.error)
    assert rec.e2e_ms < 10_000


@pytest.mark.untimed
def test_users_share_one_tls_context_per_setting(tls_files):
    """A context loads the CA store (~15 ms of CPU holding the interpreter): one per user froze
    the event loop for seconds when a level spawned 100 HTTPS users. Each setting gets one."""
    def context(**kwargs):
        client = StreamingClient("https://127.0.0.1:9/v1", "chat", **kwargs)
        return client._http._connection_pool.ssl_context

    verifying = [context() for _ in range(3)]
    assert verifying[0] is verifying[1] is verifying[2]
    assert verifying[0].check_hostname and verifying[0].verify_mode == 2  # CERT_REQUIRED
    private_ca = context(ca_bundle=str(tls_files[0]))
    assert private_ca is context(ca_bundle=str(tls_files[0])) and private_ca is not verifying[0]
    insecure = context(insecure=True)
    assert insecure is context(insecure=True) and insecure is not verifying[0]
    assert insecure.verify_mode == 0 and not insecure.check_hostname  # CERT_NONE


@pytest.mark.untimed
def test_untrusted_certificate_is_a_clear_preflight_error(tls_mock, tmp_path):
    scenario = write_scenario(tmp_path, tls_mock.base_url)
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"))
    assert result.returncode == 3
    assert "CERTIFICATE_VERIFY_FAILED" in result.stderr and "Traceback" not in result.stderr


def test_run_over_tls_with_a_private_ca(tls_mock, tls_files, tmp_path):
    scenario = write_scenario(
        tmp_path, tls_mock.base_url,
        target={"ca_bundle": str(tls_files[0])},
        load={"levels": [1, 4], "level_duration_s": 3, "warmup_s": 0.5},
    )
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    frame = read_requests(tmp_path / "run")
    assert frame[frame.error_kind.ne("cancelled")].ok.all()  # cancelled: cut by the end of the run
    rows = level_rows(frame, 4)
    gaps = np.concatenate([np.diff(np.asarray(c)) for c in rows.chunk_ms])
    assert abs(np.median(gaps) - 10) < 1.5
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert {lv["client"]["reads"] for lv in run["levels"]} == {"reactor"}  # TLS is read by the reader thread


@pytest.mark.untimed
def test_missing_ca_bundle_is_an_input_error(tmp_path):
    scenario = write_scenario(tmp_path, "https://127.0.0.1:9/v1", target={"ca_bundle": str(tmp_path / "nope.pem")})
    result = loadtest("validate", str(scenario))
    assert result.returncode == 2
    assert "target.ca_bundle: no such file" in result.stderr


class _ConnectProxy:
    """A minimal HTTP CONNECT proxy on 127.0.0.1 that pipes bytes and remembers the tunnels asked for."""

    def __init__(self) -> None:
        import socket
        import threading

        self.tunnels: list[str] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.port = self._sock.getsockname()[1]
        self._threading = threading
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(4096)
                if not data:
                    break
                head += data
            target = head.split(b" ")[1].decode()
            self.tunnels.append(target)
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            for a, b in ((conn, upstream), (upstream, conn)):
                self._threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self._sock.close()


@pytest.mark.untimed
@pytest.mark.parametrize("options", ["ca_bundle", "insecure"])  # a standard-library and a gevent TLS socket
def test_https_target_through_https_proxy_tunnel(tls_mock, tls_files, monkeypatch, options):
    proxy = _ConnectProxy()
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    kwargs = {"ca_bundle": str(tls_files[0])} if options == "ca_bundle" else {"insecure": True}
    try:
        client = StreamingClient(tls_mock.base_url, "chat", **kwargs)
        rec = client.send(build_body("chat", "mock-model", "hi", 6))
        client.close()
    finally:
        proxy.close()
    assert rec.ok, rec.error
    assert len(rec.chunk_ms) == 6
    port = tls_mock.base_url.split(":")[2].split("/")[0]
    assert proxy.tunnels == [f"127.0.0.1:{port}"]
