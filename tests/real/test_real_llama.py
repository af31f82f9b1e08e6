"""Against a real llama.cpp ``llama-server`` (built from source, tiny random model): the wire, proven.

The mock is the source of exact truths; these tests prove the client on a real
server: the preflight, chat and completions streaming, token counts from its
``usage``, keep-alive past its 100-request limit, a short capacity run with
``--refine``, and the client's timings against the server's own (per-request
``timings`` and ``/metrics``). ``LOADTEST_REAL_URL`` runs the same tests
against any other server (see tests/support/realserver/server.py); the checks that need
llama.cpp's own figures are then skipped.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from loadtest.preflight import preflight
from loadtest.client.stream import StreamingClient
from loadtest.client.wire import build_body
from loadtest.records import read_requests
from loadtest.scenario import parse_scenario
from support.realserver.server import RealServer, from_environment, start_llama_server
from support.runkit import loadtest, summary, write_scenario

TOKENS = 32


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> RealServer:
    server = from_environment()
    if server is not None:
        yield server
        return
    server = start_llama_server(tmp_path_factory.mktemp("llama"), slots=8)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def dialect(real):
    """What the server accepts, learned once by the preflight (a hosted API rejects ignore_eos)."""
    return preflight(_scenario(real), _api_key(real)).dialect


def _api_key(server: RealServer) -> str | None:
    return os.environ.get(server.api_key_env) if server.api_key_env else None


def _client(server: RealServer, api: str, timeout_s: float = 60) -> StreamingClient:
    return StreamingClient(server.base_url, api, api_key=_api_key(server), timeout_s=timeout_s)


def _body(server: RealServer, dialect, api: str, prompt: str, tokens: int) -> bytes:
    return build_body(api, server.model, prompt, tokens, drop=dialect.drop, max_tokens_field=dialect.max_tokens_field)


def _scenario(server: RealServer, **target):
    return parse_scenario({
        "name": "real", "load": {"levels": [1]},
        "target": {"base_url": server.base_url, "model": server.model, "api_key_env": server.api_key_env,
                   "timeout_s": 60, **target},
        "workload": {"prompt_tokens": {"mean": 24}, "max_tokens": TOKENS},
    })


def test_preflight_against_the_real_server(real):
    result = preflight(_scenario(real), _api_key(real))
    assert result.record.ok and len(result.record.chunk_ms) >= 1
    assert result.token_source in ("usage", "continuous_usage")
    assert result.record.prompt_tokens and result.record.prompt_tokens > 0
    if real.is_llama:
        # llama.cpp ignores fields it does not know: nothing had to be dropped.
        assert result.adaptations == [] and result.dialect.drop == ()


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_streaming_tokens_and_timings_agree_with_the_server(real, dialect, api):
    client = _client(real, api)
    try:
        recs = [client.send(_body(real, dialect, api, "the old river " * 6 + f"{i}", TOKENS)) for i in range(4)]
    finally:
        client.close()
    if not real.is_llama and recs[0].status == 404:
        pytest.skip(f"the server has no {api} endpoint")
    # With ignore_eos the output is exactly max_tokens; a server that refused it may stop sooner.
    expected = TOKENS if "ignore_eos" not in dialect.drop else None
    for rec in recs:
        assert rec.ok, rec.error
        assert rec.token_source == "usage"
        assert rec.completion_tokens == expected if expected else 0 < rec.completion_tokens <= TOKENS
        assert rec.ttfb_ms <= rec.ttft_ms == rec.chunk_ms[0] <= rec.chunk_ms[-1] <= rec.e2e_ms
        assert sum(rec.chunk_tokens) == rec.completion_tokens
    if not real.is_llama:
        return
    for rec in recs:
        t = rec.server_timings
        assert t is not None, "llama-server sends per-request timings with its usage"
        # The tiny model only ever emits whole words: one token, one chunk.
        assert len(rec.chunk_ms) == TOKENS and list(rec.chunk_tokens) == [1] * TOKENS
        assert t["predicted_n"] == rec.completion_tokens
        assert t["prompt_n"] + t.get("cache_n", 0) == rec.prompt_tokens
        # TTFT holds the server's prompt processing (plus HTTP and scheduling).
        assert rec.ttft_ms >= t["prompt_ms"]
        # The client's generation span and the server's: the same tokens, the same clock rate.
        span = rec.chunk_ms[-1] - rec.chunk_ms[0]
        assert abs(span - t["predicted_ms"]) <= max(0.3 * t["predicted_ms"], 5.0), (span, t)


def test_keepalive_past_the_servers_request_limit(real, dialect):
    """llama-server closes each connection after 100 requests; none of that may count as an error."""
    client = _client(real, "chat", timeout_s=30)
    try:
        recs = [client.send(_body(real, dialect, "chat", f"the {i}", 2)) for i in range(230)]
    finally:
        client.close()
    assert [r.error for r in recs if not r.ok] == []
    assert all(r.resends <= 1 for r in recs)


@pytest.fixture(scope="module")
def two_slots(tmp_path_factory):
    """A llama-server with 2 slots: from 3 users on, requests queue and TTFT jumps."""
    if from_environment() is not None:
        pytest.skip("the capacity truth needs our own llama-server with 2 slots")
    server = start_llama_server(tmp_path_factory.mktemp("llama2"), slots=2)
    try:
        yield server
    finally:
        server.stop()


def test_capacity_run_with_refine_finds_the_slot_count(two_slots, tmp_path):
    server = two_slots
    before = server.metrics()
    path = write_scenario(
        tmp_path, server.base_url,
        target={"model": server.model, "api": "completions", "timeout_s": 60},
        workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 160},
        load={"levels": [1, 2, 4], "level_duration_s": 6, "warmup_s": 1.5},
        # Two slots decode in parallel; a third user waits for a whole request (~100 ms).
        slo={"ttft_ms": {"p90": 60}, "itl_ms": {"p95": 1000}, "max_error_rate": 0.0},
    )
    out = tmp_path / "run"
    result = loadtest("run", str(path), "--out", str(out), "--refine", timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    after = server.metrics()
    s = summary(out)
    run = json.loads((out / "run.json").read_text())
    levels = [lv["concurrency"] for lv in run["levels"]]
    # the refine probe between 2 and 4: after the sweep, or put before 4 when the slope from 1 to 2 says so
    assert levels[:2] == [1, 2] and 3 in levels[2:], levels
    assert all(lv["refine"] for lv in run["levels"] if lv["concurrency"] == 3), run["levels"]
    assert s["capacity"]["concurrency"] == 2, s["capacity"]
    assert s["capacity"]["first_failing"] == 3, s["capacity"]
    assert "ttft" in json.dumps(s["capacity"].get("binding")), s["capacity"]
    frame = read_requests(out)
    failed = frame[~frame.ok & (frame.error_kind != "cancelled")]
    assert failed.empty, failed[["error_kind", "error"]].head()
    assert "keepalive_resends" in run
    # The server generated every token the records count (plus the preflight's few and
    # the tail of requests the harness cancelled at the end).
    generated = after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"]
    counted = frame.completion_tokens.sum()
    # (and the short requests refine sent before each probe, waiting for the server's queue: 8 tokens each)
    settle = sum(w["requests"] for w in (run.get("refine") or {}).get("waits", []))
    slack = 8 * (len(run["preflight"]["attempts"]) + settle) + 160 * int((frame.error_kind == "cancelled").sum())
    assert counted <= generated <= counted + slack, (counted, generated, slack)
    # The server's mean time per generated token against the client's mean ITL.
    server_tpot = 1000 * (after["llamacpp:tokens_predicted_seconds_total"]
                          - before["llamacpp:tokens_predicted_seconds_total"]) / generated
    ok = frame[frame.ok]
    spans = np.array([(c[-1] - c[0]) / (len(c) - 1) for c in ok.chunk_ms if len(c) > 1])
    assert abs(spans.mean() - server_tpot) <= max(0.3 * server_tpot, 0.5), (spans.mean(), server_tpot)


def test_capacity_run_with_refine_against_any_server(real, tmp_path):
    """The whole pipeline against the real server: every level measured, no failures, usage tokens."""
    path = write_scenario(
        tmp_path, real.base_url,
        target={"model": real.model, "api": "chat", "timeout_s": 60, "api_key_env": real.api_key_env},
        workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 24},
        load={"levels": [1, 2, 4], "level_duration_s": 3, "warmup_s": 0.5},
        slo={"ttft_ms": {"p95": 60000}, "itl_ms": {"p95": 60000}, "max_error_rate": 0.0},
    )
    out = tmp_path / "run"
    result = loadtest("run", str(path), "--out", str(out), "--refine", timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    s = summary(out)
    assert s["capacity"]["verdict"] == "at_least" and s["capacity"]["concurrency"] == 4, s["capacity"]
    frame = read_requests(out)
    done = frame[frame.error_kind != "cancelled"]
    assert len(done) > 10 and done.ok.all(), done[~done.ok][["error_kind", "error"]].head()
    assert set(done.token_source) == {"usage"}
    assert (done.completion_tokens == done.chunk_tokens.map(sum)).all()


def test_a_refine_probe_after_a_failing_rate_starts_on_an_empty_queue(two_slots, tmp_path):
    """An open loop at 20 req/s fails on 2 slots and ends with the server's queue full; llama-server works
    through the queued requests whose clients left. The next probe (20 req/s) started on that queue: a
    trial's first request waited 2.1 s and the rest ever less as it drained, and the level failed on the
    40 req/s level's backlog (capacity 19.38 req/s, where it held 27.5 once that was fixed). Before each
    probe the run now waits until a short request is answered about as fast as the preflight's, so each
    probe's first request starts on an empty queue, whatever the probe's own rate does later."""
    server = two_slots
    path = write_scenario(
        tmp_path, server.base_url,
        target={"model": server.model, "api": "completions", "timeout_s": 60},
        # ~100 ms a request on a slot (the capacity test above): 2 slots serve about 20 req/s
        workload={"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 160},
        load={"levels": None, "rates": [20], "arrival": "constant", "level_duration_s": 3, "max_level_duration_s": 6,
              "warmup_s": 0.5, "warmup_requests": 2},
        slo={"ttft_ms": {"p95": 250}, "itl_ms": None, "max_error_rate": 0.01},
    )
    out = tmp_path / "run"
    # a coarse resolution: 20 → 10 (after the failure) → 15 or 5 req/s, and done
    result = loadtest("run", str(path), "--out", str(out), "--refine", "--rate-resolution", "6", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    run = json.loads((out / "run.json").read_text())
    probes = [lv for lv in run["levels"] if lv["refine"]]
    assert probes, run["levels"]  # 20 req/s fails on 2 slots: refine probes below it
    baseline = run["preflight"]["ttft_ms"]
    frame = read_requests(out)
    for lv in probes:
        first = frame[frame.level_index == lv["index"]].sort_values("start_wall").iloc[0]
        # an idle server answers as the preflight did (a neighbour's stall adds tens of ms, not seconds)
        assert first.ttft_ms < max(5 * baseline, baseline + 250), (lv["rate_rps"], first.ttft_ms, baseline)
