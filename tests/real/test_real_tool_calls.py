"""A genuine streamed tool call from a real ``llama-server --jinja``, timed and judged by the rules.

The model is tiny_tool_model's: a Functionary v3.2 template, for which llama.cpp's grammar with
``tool_choice: required`` allows a function's name right after the generation prompt, and fixed
logits that make greedy grammar-constrained sampling write ``get_weather`` with
``{"city":""}`` and stop (see that module). So the server streams ``delta.tool_calls`` and no
text at all. The checks: the first content chunk is a tool-call delta and TTFT is its arrival;
a tool-call-only answer is a success (not ``empty``) with tokens from ``usage``; its joined
arguments are judged valid; a call cut by ``max_tokens`` is still a timed success but judged
invalid (broken JSON never counts as valid output); the Responses API's function call is timed
from its first ``response.function_call_arguments.delta``; and a short run measures
``valid_output_rate`` from real output. The recorded streams are the wire zoo's
``llamacpp-tool-call`` and ``llamacpp-responses-tool-call`` fixtures.
"""

from __future__ import annotations

import pytest

from loadtest.client.output_check import judge, output_check
from loadtest.client.stream import StreamingClient
from loadtest.client.wire import build_body
from loadtest.records import read_requests
from support.realserver.server import start_llama_server
from support.realserver.tiny_tool_model import write_tiny_tool_caller
from support.runkit import loadtest, summary, write_scenario

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    real = start_llama_server(tmp_path_factory.mktemp("llama-tool-calls"), slots=2, writer=write_tiny_tool_caller,
                              extra_args=("--jinja",))
    try:
        yield real
    finally:
        real.stop()


def _call(server, max_tokens: int):
    client = StreamingClient(server.base_url, "chat", timeout_s=60)
    # ignore_eos off: the end of the call is the model's EOS, which the grammar allows only then
    body = build_body("chat", server.model, "What is the weather in Paris?", max_tokens, ignore_eos=False,
                      fields={"tools": TOOLS, "tool_choice": "required"})
    try:
        rec = client.send(body, capture_text=True)
    finally:
        client.close()
    judge(output_check(TOOLS, "required", None), rec)
    return rec


def test_a_streamed_tool_call_is_content_and_valid(server):
    rec = _call(server, 40)
    assert rec.ok and rec.error_kind is None, rec.error  # a tool-call-only answer is a success
    (name, *pieces), = rec.tool_calls.values()
    assert name == "get_weather" and "".join(pieces) == '{"city":""}'
    assert rec.text and not "".join(rec.text)  # no text at all: every content chunk was a tool-call delta
    assert len(rec.chunk_ms) == len(pieces) and rec.ttft_ms == rec.chunk_ms[0] > 0
    assert rec.token_source == "usage" and rec.completion_tokens > len(rec.chunk_ms)  # the name's tokens come first
    assert sum(rec.chunk_tokens) == rec.completion_tokens
    assert rec.output_valid is True


def test_a_call_cut_by_max_tokens_is_timed_but_invalid(server):
    rec = _call(server, 16)  # the name takes about 12 tokens: the arguments are cut short
    assert rec.ok, rec.error
    assert rec.tool_calls and len(rec.chunk_ms) > 0 and rec.completion_tokens == 16
    assert rec.output_valid is False


def test_a_responses_function_call_is_timed_from_its_first_arguments_delta(server):
    """``/v1/responses``: the name comes on ``output_item.added`` (no token yet), the arguments as deltas."""
    client = StreamingClient(server.base_url, "responses", timeout_s=60)
    tools = [{"type": "function", **TOOLS[0]["function"]}]  # the Responses API's flat tool shape
    body = build_body("responses", server.model, "What is the weather in Paris?", 40, ignore_eos=False,
                      fields={"tools": tools, "tool_choice": "required"})
    try:
        rec = client.send(body, capture_text=True)
    finally:
        client.close()
    assert rec.ok and rec.error_kind is None, rec.error  # a call-only answer is a success here too
    assert len(rec.chunk_ms) == len('{"city":""}') and rec.ttft_ms == rec.chunk_ms[0] > 0  # one delta per character
    assert not "".join(rec.text)  # none of them is output text
    assert rec.token_source == "usage" and rec.completion_tokens > len(rec.chunk_ms)


def test_a_short_run_measures_the_valid_output_rate(server, tmp_path):
    scenario = write_scenario(
        tmp_path, server.base_url, target={"model": server.model, "timeout_s": 60},
        workload={"prompt_tokens": {"mean": 8, "stddev": 0}, "max_tokens": 40, "ignore_eos": False,
                  "tools": TOOLS, "tool_choice": "required"},
        load={"levels": [2], "level_duration_s": 1.5, "max_level_duration_s": 3, "warmup_s": 0.3},
        slo={"ttft_ms": {"p95": 10000}, "itl_ms": {"p95": 5000}, "e2e_ms": None, "max_error_rate": 0.05,
             "min_valid_output_rate": 0.5},
    )
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), timeout=120)
    assert result.returncode == 0, result.stderr
    (level,) = summary(tmp_path / "run")["levels"]
    assert level["errors"] == 0 and level["ttft_ms"]["n"] > 3 and level["itl_ms"]["n"] > 0
    assert level["valid_output_checked"] == level["ttft_ms"]["n"] and level["valid_output_rate"] == 1.0
    check = next(c for c in level["checks"] if c["name"] == "valid_output_rate")
    assert check["value"] == 1.0 and check["verdict"] in ("pass", "uncertain")
    frame = read_requests(tmp_path / "run")
    measured = frame[~frame.warmup & (frame.error_kind != "cancelled")]
    assert len(measured) > 3 and measured.ok.all() and measured.output_valid.astype(bool).all()
