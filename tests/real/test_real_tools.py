"""Tool calling against a real ``llama-server --jinja`` (the tiny random model).

The tiny model has no tool-calling chat template and words for a vocabulary, so it answers a
``tool_choice: required`` request in plain words. That is exactly what the structured-output
check exists for: the stream is a success by every timing rule (content chunks, usage), and
its ``output_valid`` is False, so such a server's speed never counts as valid output.
A genuine streamed tool call from llama-server is test_real_tool_calls.py's (another tiny model).
"""

from __future__ import annotations

import pytest

from loadtest.client.output_check import judge, output_check
from loadtest.client.stream import StreamingClient
from loadtest.client.wire import build_body
from support.realserver.server import start_llama_server

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    real = start_llama_server(tmp_path_factory.mktemp("llama-jinja"), slots=1, extra_args=("--jinja",))
    try:
        yield real
    finally:
        real.stop()


def test_a_text_answer_to_a_required_tool_call_is_timed_and_marked_invalid(server):
    client = StreamingClient(server.base_url, "chat", timeout_s=60)
    body = build_body("chat", server.model, "What is the weather in Paris?", 24,
                      fields={"tools": TOOLS, "tool_choice": "required"})
    try:
        rec = client.send(body, capture_text=True)
    finally:
        client.close()
    assert rec.ok, rec.error
    assert len(rec.chunk_ms) > 0 and rec.ttft_ms == rec.chunk_ms[0] and rec.completion_tokens > 0
    judge(output_check(TOOLS, "required", None), rec)
    if rec.tool_calls:  # a build whose generic template forced a call: it must then be judged on its JSON
        assert rec.output_valid is not None
    else:
        assert rec.answer and rec.output_valid is False


def test_a_valid_output_floor_judges_a_real_servers_tool_calls(server, tmp_path):
    """A 2 s run with ``tool_choice: required`` and ``slo.min_valid_output_rate: 0.9`` on the real server.

    Whatever the build answers (plain words, or a call its template forced), each level's check is
    its measured valid share and Wilson interval, and a share under the floor never passes."""
    from support.runkit import loadtest, summary, write_scenario  # only this test runs the CLI

    scenario = write_scenario(
        tmp_path, server.base_url, target={"model": server.model},
        workload={"prompt_tokens": {"mean": 8, "stddev": 0}, "max_tokens": 16, "tools": TOOLS, "tool_choice": "required"},
        load={"levels": [1], "level_duration_s": 2, "max_level_duration_s": 2, "warmup_s": 0.5},
        slo={"ttft_ms": None, "itl_ms": None, "e2e_ms": {"p95": 30000}, "max_error_rate": 0.1,
             "min_valid_output_rate": 0.9},
    )
    result = loadtest("run", str(scenario), "--out", str(tmp_path / "run"), timeout=240)
    assert result.returncode in (0, 1), result.stderr
    (level,) = summary(tmp_path / "run")["levels"]
    check = next(c for c in level["checks"] if c["name"] == "valid_output_rate")
    assert check["n"] == level["valid_output_checked"] > 0 and check["value"] == level["valid_output_rate"]
    if check["value"] < 0.9:
        assert check["verdict"] in ("fail", "uncertain") and level["status"] != "pass"
        assert check["verdict"] == ("fail" if check["ci"][1] < 0.9 else "uncertain")
    else:
        assert check["verdict"] == "pass"
