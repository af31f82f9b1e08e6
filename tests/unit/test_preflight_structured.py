"""The preflight probes with the body the run sends: the workload's tools and response_format too.

Before, it probed without them, so a server that refuses tools passed it (and every request of
the run failed), and one that answers only with a tool call had to produce text to pass. With
them, the probe may run up to 64 tokens: a server streams nothing of a call before the function's
name is whole (llama-server: about a dozen tokens), and 8 would end the probe with no content.
"""

from __future__ import annotations

import orjson

from loadtest.client.wire import Dialect
from loadtest.preflight import _body, probe_tokens
from loadtest.scenario import parse_scenario

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def _scenario(**workload) -> object:
    return parse_scenario({"name": "p", "target": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
                           "workload": {"max_tokens": 128, **workload}, "load": {"levels": [1]}})


def test_the_probe_carries_the_tools_and_may_run_longer():
    scenario = _scenario(tools=TOOLS, tool_choice="required")
    body = orjson.loads(_body(scenario, Dialect(), probe_tokens(scenario)))
    assert body["tools"][0]["function"]["name"] == "get_weather" and body["tool_choice"] == "required"
    assert body["max_tokens"] == 64


def test_the_probe_carries_a_response_format():
    fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}}
    scenario = _scenario(response_format=fmt)
    body = orjson.loads(_body(scenario, Dialect(), probe_tokens(scenario)))
    assert body["response_format"]["type"] == "json_schema" and body["max_tokens"] == 64
    assert probe_tokens(_scenario(response_format=fmt, max_tokens=20)) == 20  # never past the workload's own


def test_a_plain_workloads_probe_is_unchanged():
    scenario = _scenario()
    body = orjson.loads(_body(scenario, Dialect(), probe_tokens(scenario)))
    assert "tools" not in body and "response_format" not in body and body["max_tokens"] == 8
