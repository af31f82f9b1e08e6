"""The Responses API (``api: responses``) against a real ``llama-server`` and its ``/v1/responses``.

llama-server streams named events (``response.created`` ... ``response.output_text.delta`` ...
``response.completed``) with no ``[DONE]``; usage (``input_tokens``, ``output_tokens``,
``input_tokens_details.cached_tokens``) comes on ``response.completed``, beside llama.cpp's own
``timings``. The checks: each text delta is one content chunk (TTFT is the first), the token
counts are the server's usage and agree with its timings, and a short ``loadtest run`` through
the whole pipeline says its tokens came from usage. The recorded stream is the wire zoo's
``llamacpp-responses`` fixture; llama-server's mid-stream error (an unnamed ``data: {"error"}``)
is ``llamacpp-responses-error`` there, as a real server cannot be made to fail on cue.
"""

from __future__ import annotations

import pytest

from loadtest.client.stream import StreamingClient
from loadtest.client.wire import build_body
from loadtest.records import read_requests
from support.realserver.server import start_llama_server
from support.realserver.verdict import assert_generous_slo_held
from support.runkit import loadtest, summary, write_scenario

MAX_TOKENS = 8


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    real = start_llama_server(tmp_path_factory.mktemp("llama-responses"), slots=2)
    try:
        yield real
    finally:
        real.stop()


@pytest.mark.parametrize("use_reactor", [True, False], ids=["reactor", "greenlet"])
def test_a_streamed_response_is_timed_from_its_first_text_delta(server, use_reactor):
    client = StreamingClient(server.base_url, "responses", timeout_s=30, use_reactor=use_reactor)
    try:
        rec = client.send(build_body("responses", server.model, "the time people", MAX_TOKENS), capture_text=True)
    finally:
        client.close()
    assert rec.ok, rec.error
    # one output_text.delta per token, each a content chunk with its text; none of the other events count
    assert len(rec.chunk_ms) == MAX_TOKENS == len(rec.text) and all(rec.text)
    assert rec.ttft_ms == rec.chunk_ms[0] > 0 and list(rec.chunk_ms) == sorted(rec.chunk_ms)
    assert rec.e2e_ms >= rec.chunk_ms[-1]
    # the tokens are response.completed's usage, and llama.cpp's timings (on the same event) agree
    assert rec.token_source == "usage" and rec.completion_tokens == MAX_TOKENS
    timings = rec.server_timings
    assert timings is not None and timings["predicted_n"] == MAX_TOKENS
    assert rec.prompt_tokens == timings["prompt_n"] + timings["cache_n"] > 0
    assert rec.cached_tokens == timings["cache_n"]


def test_a_short_responses_run_through_the_pipeline(server, tmp_path):
    scenario = write_scenario(
        tmp_path, server.base_url,
        target={"api": "responses", "model": server.model, "timeout_s": 30},
        workload={"prompt_tokens": {"mean": 12, "stddev": 0}, "max_tokens": MAX_TOKENS},
        load={"levels": [2], "level_duration_s": 1.5, "max_level_duration_s": 5, "warmup_s": 0.3},
        slo={"ttft_ms": {"p95": 10000}, "itl_ms": {"p95": 5000}, "max_error_rate": 0.05},
    )
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "tokens from usage" in result.stdout + result.stderr  # the preflight read response.completed's usage
    s = summary(tmp_path / "run")
    assert s["target"]["api"] == "responses"
    assert s["token_source"]["primary"] == "usage" and set(s["prompt_token_source"]) == {"usage"}
    assert_generous_slo_held(s["capacity"])  # a 10 s limit holds (or a busy host is said to be busy)
    for level in s["levels"]:
        assert level["errors"] == 0 and level["ttft_ms"]["n"] > 3 and level["itl_ms"]["n"] > 0
        assert level["output_tokens_per_s"] > 0
    frame = read_requests(tmp_path / "run")
    measured = frame[~frame.warmup & (frame.error_kind != "cancelled")]
    assert len(measured) > 6 and measured.ok.all()
    assert (measured.completion_tokens == MAX_TOKENS).all() and (measured.token_source == "usage").all()
    # <=: on a busy host one read may bring a whole 8-token stream, and each chunk is stamped at its read
    assert (measured.ttft_ms > 0).all() and (measured.ttft_ms <= measured.e2e_ms).all()
