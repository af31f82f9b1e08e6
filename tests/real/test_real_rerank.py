"""Rerank (``api: rerank``) against a real ``llama-server --reranking`` and its ``/v1/rerank``.

The model is tiny_model's reranker: a random-weight Qwen3-layout cross-encoder with pooling type
``rank`` and a ``cls.output`` head, so llama-server scores each (query, document) pair as one
sequence (BOS query EOS document EOS) in a slot of its own. The checks: one request's record
(its documents as ``items``, scored results for all of them, prompt tokens from ``usage``,
which equal both llama.cpp's own tokenizer over those pairs and the rise of its
``prompt_tokens_total``), and a short ``loadtest run`` whose e2e latency, items/s and verdict
come through the pipeline with every request's documents counted. llama-server has no
``/score`` route (vLLM's score kind): that kind is not checked against it.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from loadtest.client.stream import StreamingClient
from loadtest.client.wire import build_body
from loadtest.records import read_requests
from support.realserver.server import start_llama_server
from support.realserver.tiny_model import write_tiny_reranker
from support.realserver.verdict import assert_generous_slo_held
from support.runkit import loadtest, summary, write_scenario

QUERY = "what time people"
DOCUMENTS = ["the time people", "used such power", "area also made later west", "hello"]
BATCH = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    real = start_llama_server(tmp_path_factory.mktemp("llama-rerank"), slots=BATCH, writer=write_tiny_reranker,
                              alias="tiny-reranker", extra_args=("--reranking",))
    try:
        yield real
    finally:
        real.stop()


def _tokens(server, text: str) -> int:
    """llama.cpp's own token count of ``text`` (no BOS/EOS: the server adds those per pair)."""
    body = json.dumps({"content": text, "add_special": False}).encode()
    request = urllib.request.Request(server.root + "/tokenize", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return len(json.loads(resp.read())["tokens"])


def test_one_rerank_request_counts_every_document(server):
    before = server.metrics()["llamacpp:prompt_tokens_total"]
    client = StreamingClient(server.base_url, "rerank", timeout_s=30)
    try:
        rec = client.send(build_body("rerank", server.model, [QUERY, *DOCUMENTS], 1))
    finally:
        client.close()
    assert rec.ok, rec.error
    assert rec.items == len(DOCUMENTS) and rec.token_source == "usage" and rec.completion_tokens == 0
    assert rec.e2e_ms > 0 and rec.ttft_ms != rec.ttft_ms and len(rec.chunk_ms) == 0  # not streamed: no TTFT
    # the server's usage is its real count: each pair is BOS + query + EOS + document + EOS
    pairs = sum(_tokens(server, QUERY) + _tokens(server, doc) + 3 for doc in DOCUMENTS)
    assert rec.prompt_tokens == pairs
    assert server.metrics()["llamacpp:prompt_tokens_total"] - before == pairs


def test_a_short_rerank_run(server, tmp_path):
    scenario = write_scenario(
        tmp_path, server.base_url,
        target={"api": "rerank", "model": server.model, "timeout_s": 30},
        # short pairs (about 15 tokens each): enough answers in 1.5 s even when the shared host is busy
        workload={"query_tokens": {"mean": 4, "stddev": 0}, "prompt_tokens": {"mean": 8, "stddev": 0},
                  "batch_size": BATCH},
        load={"levels": [2], "level_duration_s": 1.5, "max_level_duration_s": 5, "warmup_s": 0.3},
        slo={"e2e_ms": {"p95": 10000}, "max_error_rate": 0.05, "ttft_ms": None, "itl_ms": None},
    )
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "(not streamed), tokens from usage" in result.stderr  # the preflight's line
    assert "items/s" in result.stderr and "items/s" in result.stdout  # the level's line and the table
    s = summary(tmp_path / "run")
    assert_generous_slo_held(s["capacity"])  # a 10 s limit holds (or a busy host is said to be busy)
    (level,) = s["levels"]
    assert level["errors"] == 0 and level["e2e_ms"]["n"] > 3 and level["e2e_ms"]["p95"] < 10000
    assert level["ttft_ms"]["n"] == 0 and level["itl_ms"]["n"] == 0  # nothing streamed, nothing claimed
    assert level["items_per_s"] == pytest.approx(BATCH * level["requests_per_s"], rel=1e-3)
    assert level["input_tokens_per_s"] > level["items_per_s"]  # several tokens per document
    frame = read_requests(tmp_path / "run")
    measured = frame[~frame.warmup & (frame.error_kind != "cancelled")]
    assert len(measured) > 3 and measured.ok.all() and (measured["items"] == BATCH).all()
    assert (measured.prompt_token_source == "usage").all() and (measured.prompt_tokens > BATCH * 3).all()
