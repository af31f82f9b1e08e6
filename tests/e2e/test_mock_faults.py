"""Each fault flag does what it says, and /metrics counts it; auth and the CLI's errors."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys

import httpx
import orjson
import pytest

from loadtest.cli import main as cli_main
from loadtest.mock import MockServer
from support.probe import ProbeResult, probe

pytestmark = [pytest.mark.solo, pytest.mark.timeout(60)]

FAST = ["--decode-base-ms", "2", "--decode-per-seq-ms", "0"]
CHAT = "/v1/chat/completions"


def chat_body(max_tokens: int = 10, stream: bool = True) -> dict:
    return {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": max_tokens,
        "stream": stream,
    }


def run_probe(mock: MockServer, body: dict, path: str = CHAT) -> ProbeResult:
    return asyncio.run(probe(mock.host, mock.port, path, body, timeout=20))


@pytest.mark.untimed
def test_fail_rate_gives_500() -> None:
    with MockServer([*FAST, "--fail-rate", "1"]) as mock:
        with httpx.Client(base_url=mock.base_url, trust_env=False, timeout=10) as http:
            for stream in (True, False):
                r = http.post("/chat/completions", json=chat_body(stream=stream))
                assert r.status_code == 500
                assert r.json()["error"]["type"] == "server_error"
        assert mock.requests_by_status() == {500: 2}
        assert mock.metrics()['loadtest_mock_faults_total{kind="fail"}'] == 2


def test_rate_limit_queue_gives_429_with_retry_after() -> None:
    with MockServer([*FAST, "--max-batch", "1", "--rate-limit-queue", "0"]) as mock:

        async def go() -> tuple[ProbeResult, ProbeResult, ProbeResult]:
            long = asyncio.create_task(
                probe(mock.host, mock.port, CHAT, chat_body(100), timeout=20)
            )
            await asyncio.sleep(0.05)  # it holds the only slot now
            limited = await probe(mock.host, mock.port, CHAT, chat_body(2), timeout=5)
            first = await long
            after = await probe(mock.host, mock.port, CHAT, chat_body(2), timeout=5)
            return first, limited, after

        first, limited, after = asyncio.run(go())
        assert first.status == 200 and first.complete
        assert limited.status == 429
        assert limited.headers["retry-after"] == "1"
        assert orjson.loads(limited.body)["error"]["code"] == "rate_limit_exceeded"
        assert after.status == 200 and after.complete
        assert mock.requests_by_status() == {200: 2, 429: 1}


@pytest.mark.untimed
def test_drop_cuts_the_stream_without_done() -> None:
    with MockServer([*FAST, "--drop-rate", "1"]) as mock:
        r = run_probe(mock, chat_body(20))
        assert r.status == 200
        assert not r.complete  # the HTTP body was cut, not ended
        assert all(data != b"[DONE]" for _, data in r.events)
        assert len(r.content_times()) == 10  # half of the 20 tokens
        # A line-reading client sees the cut as an error.
        with httpx.Client(base_url=mock.base_url, trust_env=False, timeout=10) as http:
            with pytest.raises(httpx.RemoteProtocolError):
                with http.stream("POST", "/chat/completions", json=chat_body(20)) as resp:
                    for _ in resp.iter_lines():
                        pass
            # Non-streaming: a 200 head, then half the body, then the cut.
            with pytest.raises(httpx.RemoteProtocolError):
                http.post("/chat/completions", json=chat_body(20, stream=False))
        assert mock.requests_by_status() == {200: 3}
        assert mock.metrics()['loadtest_mock_faults_total{kind="drop"}'] == 3


@pytest.mark.untimed
def test_malformed_sends_one_chunk_that_is_not_json() -> None:
    with MockServer([*FAST, "--malformed-rate", "1"]) as mock:
        r = run_probe(mock, chat_body(10))
        assert r.complete
        assert r.events[-1][1] == b"[DONE]"
        bad = []
        for _, data in r.events[:-1]:
            try:
                json.loads(data)
            except json.JSONDecodeError:
                bad.append(data)
        assert len(bad) == 1
        assert len(r.content_times()) == 9  # the tenth token is in the broken chunk
        # Non-streaming: the body is not valid JSON.
        r = run_probe(mock, chat_body(10, stream=False))
        assert r.status == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(r.body)


def test_stall_pauses_once_for_stall_s() -> None:
    with MockServer(
        ["--decode-base-ms", "10", "--decode-per-seq-ms", "0"]
        + ["--stall-rate", "1", "--stall-s", "0.3"]
    ) as mock:
        r = run_probe(mock, chat_body(10))
        assert r.complete
        gaps = sorted(r.gaps_ms())
        assert len(gaps) == 9
        # stall_s, rounded up to a step; the client's two arrival times each
        # carry some scheduling jitter, hence the millisecond below.
        assert 299 <= gaps[-1] <= 300 + 10 + 5, gaps
        assert abs(statistics.median(gaps[:-1]) - 10) <= 2
        assert mock.metrics()['loadtest_mock_faults_total{kind="stall"}'] == 1


def test_stall_holds_the_slot() -> None:
    with MockServer(
        [*FAST, "--max-batch", "1", "--stall-rate", "1", "--stall-s", "0.3"]
    ) as mock:

        async def go() -> tuple[ProbeResult, ProbeResult]:
            a = asyncio.create_task(probe(mock.host, mock.port, CHAT, chat_body(4), timeout=5))
            await asyncio.sleep(0.05)
            b = await probe(mock.host, mock.port, CHAT, chat_body(4), timeout=5)
            return await a, b

        a, b = asyncio.run(go())
        # b could only start when a, stalled for 0.3 s, had finished.
        assert b.content_times()[0] >= a.content_times()[-1]


def test_a_client_that_gives_up_on_a_stall_frees_the_slot() -> None:
    with MockServer(
        [*FAST, "--max-batch", "1", "--stall-rate", "1", "--stall-s", "30"]
    ) as mock:

        async def go() -> None:
            with pytest.raises(asyncio.TimeoutError):  # stalled after 5 of 10 tokens
                await asyncio.wait_for(
                    probe(mock.host, mock.port, CHAT, chat_body(10), timeout=20), 0.3
                )
            await asyncio.sleep(0.05)

        asyncio.run(go())
        assert mock.metrics()['vllm:num_requests_running{model_name="mock-model"}'] == 0


@pytest.mark.untimed
def test_faults_are_reproducible_with_a_seed() -> None:
    def statuses() -> list[int]:
        with MockServer([*FAST, "--fail-rate", "0.5", "--seed", "7"]) as mock:
            with httpx.Client(base_url=mock.base_url, trust_env=False, timeout=10) as http:
                return [
                    http.post("/chat/completions", json=chat_body(1, stream=False)).status_code
                    for _ in range(16)
                ]

    first = statuses()
    assert set(first) == {200, 500}
    assert statuses() == first


@pytest.mark.untimed
def test_api_key() -> None:
    with MockServer([*FAST, "--api-key", "sekrit"]) as mock:
        with httpx.Client(base_url=mock.base_url, trust_env=False, timeout=10) as http:
            body = chat_body(2, stream=False)
            assert http.post("/chat/completions", json=body).status_code == 401
            wrong = http.post(
                "/chat/completions", json=body, headers={"Authorization": "Bearer nope"}
            )
            assert wrong.status_code == 401
            assert wrong.json()["error"]["code"] == "invalid_api_key"
            right = http.post(
                "/chat/completions", json=body, headers={"Authorization": "Bearer sekrit"}
            )
            assert right.status_code == 200
            assert http.get("/models").status_code == 401
            auth = {"Authorization": "Bearer sekrit"}
            assert http.get("/models", headers=auth).status_code == 200
            assert httpx.get(mock.url + "/health", trust_env=False).status_code == 200
        assert mock.requests_by_status() == {200: 1, 401: 2}


# -- CLI errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--fail-rate", "1.5"], "--fail-rate: must be between 0 and 1"),
        (["--drop-rate", "-0.1"], "--drop-rate: must be between 0 and 1"),
        (["--malformed-rate", "2"], "--malformed-rate: must be between 0 and 1"),
        (["--stall-rate", "nan"], "--stall-rate: must be between 0 and 1"),
        (["--stall-s", "-1"], "--stall-s: must be a number >= 0"),
        (["--max-batch", "0"], "--max-batch: must be at least 1"),
        (["--decode-base-ms", "-1"], "--decode-base-ms: must be a number >= 0"),
        (["--decode-per-seq-ms", "inf"], "--decode-per-seq-ms: must be a number >= 0"),
        (["--tokens-per-chunk", "0"], "--tokens-per-chunk: must be at least 1"),
        (["--rate-limit-queue", "-1"], "--rate-limit-queue: must be >= 0"),
        (["--port", "70000"], "--port: must be between 0 and 65535"),
    ],
)
@pytest.mark.untimed
def test_bad_options_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["mock", *argv]) == 2
    err = capsys.readouterr().err
    assert err == f"loadtest mock: error: {message}\n"


@pytest.mark.untimed
def test_port_in_use_is_one_clear_line() -> None:
    with MockServer(FAST) as mock:
        proc = subprocess.run(
            [sys.executable, "-m", "loadtest", "mock", "--port", str(mock.port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        # exit 2 (a bad option), naming it: it was 1, which the exit-code table does not list
        assert proc.returncode == 2, proc.stderr
        assert f"--port {mock.port}: cannot listen on 127.0.0.1" in proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.untimed
def test_a_host_or_log_the_mock_cannot_use_names_its_option(tmp_path) -> None:
    """``--host 999.1.1.1`` exited 1; ``--request-log DIR`` said ``DIR: is a directory`` without the option."""
    cases = [
        (["--host", "999.1.1.1", "--port", "0"], "--host 999.1.1.1: cannot listen on 999.1.1.1:0"),
        (["--port", "0", "--request-log", str(tmp_path)], f"--request-log {tmp_path}: is a directory"),
        (["--port", "0", "--arrival-log", str(tmp_path)], f"--arrival-log {tmp_path}: is a directory"),
    ]
    for argv, says in cases:
        proc = subprocess.run([sys.executable, "-m", "loadtest", "mock", *argv],
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert proc.stderr.startswith(f"loadtest mock: error: {says}") and len(proc.stderr.splitlines()) == 1, proc.stderr
