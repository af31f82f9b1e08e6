"""Request kinds without a server: structured-output checks, the mock's tool-call and schema
streams read back by the client's decoder, and the scenario's one-line errors for the new fields."""

from __future__ import annotations

import time

import orjson
import pytest
from jsonschema import Draft202012Validator

from loadtest.client.decode import StreamDecoder
from loadtest.client.output_check import ToolCall, judge, output_check
from loadtest.client.record import RequestRecord
from loadtest.client.responses import read_event
from loadtest.client.unary import inputs_sent, read_embeddings
from loadtest.client.wire import build_body
from loadtest.errors import InputError
from loadtest.mock.structured import StructuredEncoder, instance, pieces, plan_for
from loadtest.scenario import parse_scenario
from loadtest.workload import Workload

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 2}, "unit": {"enum": ["c", "f"]},
                   "days": {"type": "integer", "minimum": 1}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "out", "schema": WEATHER}}


def test_tool_call_checks():
    check = output_check(TOOLS, "auto", None)
    assert check.valid("", [ToolCall("get_weather", '{"city": "Paris", "unit": "c"}')])
    assert not check.valid("", [ToolCall("get_weather", '{"city": "Paris", "unit": "c"')])  # cut JSON
    assert not check.valid("", [ToolCall("get_weather", '{"city": "Paris", "unit": "k"}')])  # not in the enum
    assert not check.valid("", [ToolCall("get_time", '{}')])  # a tool nobody offered
    assert check.valid("It is sunny.", [])  # auto: the model may answer in words
    assert not output_check(TOOLS, "required", None).valid("It is sunny.", [])
    named = output_check(TOOLS, {"type": "function", "function": {"name": "get_weather"}}, None)
    assert named.valid("", [ToolCall("get_weather", '{"city": "Rome", "unit": "f"}')])
    assert not output_check(TOOLS, "none", None).valid("", [ToolCall("get_weather", '{"city": "Rome", "unit": "f"}')])


def test_schema_and_json_object_checks():
    check = output_check(None, None, SCHEMA_FORMAT)
    assert check.valid('{"city": "Oslo", "unit": "c"}', [])
    assert not check.valid('{"city": "Oslo"}', [])  # unit is required
    assert not check.valid('{"city": "Oslo", "unit": "c"', [])
    loose = output_check(None, None, {"type": "json_object"})
    assert loose.valid('{"anything": 1}', []) and not loose.valid("[1, 2]", []) and not loose.valid("nope", [])
    assert output_check(None, None, None) is None


def test_a_failed_request_is_not_judged():
    rec = RequestRecord(start_wall=0.0, start_perf=0.0)
    rec.fail("timeout", "slow")
    judge(output_check(TOOLS, "required", None), rec)
    assert rec.output_valid is None


@pytest.mark.parametrize("n", [1, 2, 7, 40])
def test_the_mock_document_validates_and_fills_exactly_n_pieces(n):
    doc = instance(WEATHER)
    assert Draft202012Validator(WEATHER).is_valid(doc)
    whole = pieces(WEATHER, n, broken=False)
    assert len(whole) == n and all(whole) and orjson.loads("".join(whole)) == doc
    cut = pieces(WEATHER, n, broken=True)
    assert len(cut) == n and all(cut)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads("".join(cut))


def _stream(body: dict, style: str, broken: bool, max_tokens: int) -> bytes:
    """Every event of one mock answer, as StreamSink would write it (one token per chunk)."""
    enc = StructuredEncoder(
        plan_for(body), style=style, broken=broken, chat=True, request_id="chatcmpl-1", created=1, model="m",
        prompt_tokens=5, max_tokens=max_tokens, tokens_per_chunk=1, include_usage=True, continuous_usage=False,
        stamp=False, chunked=False,
    )
    out = enc.role(0.0)
    for generated in range(1, max_tokens + 1):
        out += enc.content(1, generated, 0.0)
    return out + enc.end(0.0)


@pytest.mark.parametrize("style", ["openai", "vllm"])
@pytest.mark.parametrize("broken", [False, True], ids=["whole", "broken"])
def test_mock_tool_call_streams_read_back_as_content_and_judged(style, broken):
    """A tool-call-only answer is max_tokens content chunks (TTFT at the first), ok, not empty."""
    raw = _stream({"tools": TOOLS, "tool_choice": "required"}, style, broken, 12)
    rec = RequestRecord(start_wall=time.time(), start_perf=0.0)
    decoder = StreamDecoder(rec, "chat", capture_text=True)
    assert decoder.feed(raw, 0.010)
    decoder.close(0.011)
    assert rec.ok, rec.error
    assert len(rec.chunk_ms) == 12 and rec.completion_tokens == 12 and rec.ttft_ms == pytest.approx(10.0)
    assert rec.tool_calls[0][0] == "get_weather"
    judge(output_check(TOOLS, "required", None), rec)
    assert rec.output_valid is (not broken)
    first = [orjson.loads(e[6:]) for e in raw.split(b"\n\n") if e.startswith(b"data: {")][0]
    if style == "openai":  # the role arrives with the call's header
        assert first["choices"][0]["delta"]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": ""}
    else:  # vLLM: a role chunk of its own
        assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}


def test_mock_schema_output_reads_back_and_validates():
    raw = _stream({"response_format": SCHEMA_FORMAT}, "openai", False, 9)
    rec = RequestRecord(start_wall=time.time(), start_perf=0.0)
    decoder = StreamDecoder(rec, "chat", capture_text=True)
    decoder.feed(raw, 0.002)
    decoder.close(0.003)
    assert rec.ok and len(rec.chunk_ms) == 9
    judge(output_check(None, None, SCHEMA_FORMAT), rec)
    assert rec.output_valid is True


@pytest.mark.parametrize("data, line", [
    ({"slo": {"ttft_ms": {"p95": 100}}}, "s.yaml: slo.ttft_ms: embeddings are not streamed"),
    ({"workload": {"classes": [{"name": "a", "slo": {"itl_ms": {"p95": 9}}}]}},
     "s.yaml: workload.classes[0].slo.itl_ms: embeddings are not streamed"),
    ({"workload": {"conversation": {"turns": 2}}}, "s.yaml: workload.conversation: not with target.api embeddings"),
    ({"workload": {"tools": TOOLS}}, "s.yaml: workload.tools: not with target.api embeddings"),
])
def test_embeddings_refuse_streaming_fields_in_one_line(data, line):
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "e", "target": {"api": "embeddings"}, "load": {"levels": [1]}, **data}, "s.yaml")
    assert str(err.value).startswith(line), str(err.value)


def test_embeddings_bodies_carry_a_batch_and_the_answer_is_checked():
    scenario = parse_scenario({"name": "e", "target": {"api": "embeddings", "model": "bge"}, "load": {"levels": [1]},
                               "workload": {"batch_size": 3, "prompt_tokens": {"mean": 5}}}, "s.yaml")
    planned = Workload(scenario, seed=1).next_request()
    body = orjson.loads(planned.body)
    assert body["model"] == "bge" and len(body["input"]) == 3 and "stream" not in body and "max_tokens" not in body
    assert len(set(body["input"])) == 3 and planned.prompt_words == 15  # three distinct inputs of 5 words
    assert inputs_sent(planned.body) == 3 and inputs_sent(b'{"input": [1, 2, 3]}') == 1
    rec = RequestRecord(start_wall=0.0, start_perf=0.0)
    answer = {"data": [{"embedding": [0.1], "index": i} for i in range(3)], "usage": {"prompt_tokens": 17}}
    read_embeddings(rec, orjson.dumps(answer), 3)
    assert rec.ok and rec.items == 3 and rec.prompt_tokens == 17 and rec.token_source == "usage"
    short = RequestRecord(start_wall=0.0, start_perf=0.0)
    read_embeddings(short, orjson.dumps({"data": answer["data"][:2]}), 3)
    assert short.error_kind == "malformed" and short.items == 3
    broken = RequestRecord(start_wall=0.0, start_perf=0.0)
    read_embeddings(broken, b'{"data": [', 1)
    assert broken.error_kind == "malformed"


def _scenario(**workload) -> dict:
    return {"name": "k", "workload": workload, "load": {"levels": [1]}}


@pytest.mark.parametrize("workload, line", [
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]},
     "workload.tools[0].function.parameters: is not a valid JSON Schema"),
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "workload.tools[0].function.name: must be"),
    ({"tools": [{"function": {"name": "f"}, "extra": 1}]}, "workload.tools[0].extra: unknown key"),
    ({"tool_choice": "sometimes"}, "workload.tool_choice"),
    ({"response_format": {"type": "json_schema"}}, "workload.response_format: type json_schema needs a json_schema"),
    ({"response_format": {"type": "yaml"}}, "workload.response_format.type: must be one of"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": {"type": 3}}}},
     "workload.response_format.json_schema.schema: is not a valid JSON Schema"),
    ({"classes": [{"name": "a", "model": ""}]}, "workload.classes[0].model:"),
    ({"batch_size": 4}, "workload.batch_size: only with target.api embeddings"),
    ({"batch_size": 0}, "workload.batch_size: must be a positive integer"),
])
def test_new_fields_fail_in_one_line_naming_their_path(workload, line):
    with pytest.raises(InputError) as err:
        parse_scenario(_scenario(**workload), "s.yaml")
    message = str(err.value)
    assert line in message and "\n" not in message, message


def test_class_model_and_tools_reach_the_body():
    scenario = parse_scenario(_scenario(
        tools=TOOLS, tool_choice="required",
        classes=[{"name": "base", "weight": 1}, {"name": "lora", "weight": 1, "model": "adapter-1",
                                                   "response_format": {"type": "json_object"}}],
    ), "s.yaml")
    seen = {}
    workload = Workload(scenario, seed=3)
    for _ in range(40):
        planned = workload.next_request()
        body = orjson.loads(planned.body)
        seen[planned.class_name] = body
        assert planned.capture_text and planned.output_check is not None
    assert seen["base"]["model"] == scenario.target.model and seen["lora"]["model"] == "adapter-1"
    assert seen["base"]["tools"][0]["function"]["name"] == "get_weather" and seen["base"]["tool_choice"] == "required"
    assert seen["lora"]["response_format"] == {"type": "json_object"} and "response_format" not in seen["base"]


def test_responses_bodies_and_events():
    body = orjson.loads(build_body("responses", "m", [{"role": "user", "content": "hi"}], 9))
    assert body["input"] == [{"role": "user", "content": "hi"}] and body["max_output_tokens"] == 9
    assert body["stream"] is True and "stream_options" not in body and "max_tokens" not in body
    assert read_event({"type": "response.output_text.delta", "delta": "x"}).content
    assert not read_event({"type": "response.output_text.delta", "delta": ""}).content
    assert not read_event({"type": "response.content_part.added", "part": {"text": ""}}).content
    assert not read_event({"type": "response.output_text.done", "text": "whole"}).content
    assert read_event({"type": "response.function_call_arguments.delta", "delta": "{"}).content
    facts = read_event({"type": "response.incomplete", "response": {"usage": {"output_tokens": 4, "input_tokens": 2}}})
    assert facts.finished and facts.usage_completion == 4 and facts.usage_prompt == 2
    assert "boom" in read_event({"type": "error", "message": "boom"}).error
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "r", "target": {"api": "responses"}, "load": {"levels": [1]},
                        "workload": {"tools": TOOLS}}, "s.yaml")
    assert str(err.value).startswith("s.yaml: workload.tools: not with target.api responses")


def test_images_reach_the_body_unique_and_the_mock_counts_their_tokens():
    from loadtest.mock.parse import BadRequest, parse_request

    scenario = parse_scenario({"name": "i", "load": {"levels": [1]}, "workload": {
        "prompt_tokens": {"mean": 4}, "images": {"count": 2, "width": 56, "height": 28, "format": "jpeg"}}}, "s.yaml")
    first, second = Workload(scenario, seed=1), Workload(scenario, seed=2)
    planned = [first.next_request() for _ in range(3)] + [second.next_request()]
    urls = [p["image_url"]["url"] for q in planned for p in orjson.loads(q.body)["messages"][-1]["content"]
            if p["type"] == "image_url"]
    assert len(urls) == 8 == len(set(urls)) and all(u.startswith("data:image/jpeg;base64,") for u in urls)
    assert planned[0].images == 2 and planned[0].image_bytes > 0
    # the mock: 4 words + 2 × (64 per image + 56 × 28 / 784 = 2 per pixel) tokens
    assert parse_request(planned[0].body, chat=True).prompt_tokens == 4 + 2 * (64 + 2)
    bad = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}
    with pytest.raises(BadRequest) as err:
        parse_request(orjson.dumps(bad), chat=True)
    assert err.value.param == "messages[0].content[0]"
    shared = parse_scenario({"name": "i", "load": {"levels": [1]}, "workload": {
        "images": {"width": 32, "height": 32, "unique": False}}}, "s.yaml")
    same = {orjson.loads(Workload(shared, seed=s).next_request().body)["messages"][-1]["content"][1]["image_url"]["url"]
            for s in range(3)}
    assert len(same) == 1  # unique: false shares one image per size


@pytest.mark.parametrize("data, line", [
    ({"workload": {"images": {"count": 0}}}, "s.yaml: workload.images.count: must be a positive integer"),
    ({"workload": {"images": {"format": "gif"}}}, "s.yaml: workload.images.format: must be one of"),
    ({"target": {"api": "completions"}, "workload": {"images": {}}}, "s.yaml: workload.images: only with target.api chat"),
])
def test_image_fields_fail_in_one_line(data, line):
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "i", "load": {"levels": [1]}, **data}, "s.yaml")
    assert str(err.value).startswith(line), str(err.value)
