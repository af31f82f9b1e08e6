"""The workload package without a server: datasets, shared prefixes, conversations, classes.

What reaches a real server is checked end to end in test_workload_e2e.py; here
the loaders' errors and the generator's bookkeeping are checked directly.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import orjson
import pytest

from loadtest.analysis.classes import class_slos, split_overrides
from loadtest.analysis.slo import SloSpec
from loadtest.errors import InputError
from loadtest.scenario import parse_scenario
from loadtest.workload import Workload, prepare, workload_fingerprint
from loadtest.workload.dataset import _read

DATA = Path(__file__).parents[2] / "scenarios" / "data"


def scenario(tmp_path: Path | None = None, **workload):
    return parse_scenario({"name": "t", "load": {"levels": [1]}, "workload": workload})


def messages(planned) -> list[dict]:
    return orjson.loads(planned.body)["messages"]


# -- datasets -----------------------------------------------------------------------------------


def test_shipped_datasets_load_with_their_fingerprints():
    jsonl = _read(str(DATA / "chat-prompts.jsonl"), "jsonl")
    assert len(jsonl.entries) == 300 and jsonl.skipped == 0
    assert sum(e.messages is not None for e in jsonl.entries) == 60
    assert sum(e.output_tokens is not None for e in jsonl.entries) == 100
    share = _read(str(DATA / "sharegpt-sample.json"), "sharegpt")
    assert len(share.entries) == 118 and share.skipped == 2
    assert all(e.output_tokens and 20 <= e.output_tokens <= 160 for e in share.entries)
    assert len(share.sha256) == 64 and share.sha256 != jsonl.sha256


def test_sharegpt_is_read_as_a_stream_across_read_blocks(tmp_path, monkeypatch):
    """Items that straddle read blocks parse the same as from one block (block size 7 bytes)."""
    import loadtest.workload.dataset as dataset

    rows = [{"conversations": [{"from": "human", "value": f"q{i} ü"}, {"from": "gpt", "value": "a b c"}]} for i in range(40)]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    monkeypatch.setattr(dataset, "_READ_SIZE", 7)
    got = dataset._read(str(path), "sharegpt")
    assert [e.prompt for e in got.entries] == [f"q{i} ü" for i in range(40)]
    assert {e.output_tokens for e in got.entries} == {3}
    lines = tmp_path / "s.jsonl"  # ShareGPT as one object per line is accepted too
    lines.write_text("\n".join(json.dumps(r) for r in rows))
    assert len(dataset._read(str(lines), "sharegpt").entries) == 40


BAD_ROWS = [
    ("jsonl", '{"prompt": "ok"}\n\n{"prompt": 3}\n', "line 3: 'prompt' must be a non-empty string"),
    ("jsonl", '{"prompt": "ok"}\nnot json\n', "line 2: not valid JSON"),
    ("jsonl", '{"text": "x"}\n', "line 1: needs 'prompt' (a string) or 'messages'"),
    ("jsonl", '{"prompt": "x", "max_tokens": 0}\n', "line 1: 'max_tokens' must be a positive integer"),
    ("jsonl", '{"messages": [{"role": "system", "content": "s"}]}\n', "line 1: 'messages' has no message with role 'user'"),
    ("jsonl", "\n\n", "the dataset is empty"),
    ("sharegpt", '[\n{"conversations": []},\n{"conversations": 5}\n]', "line 3: expected {\"conversations\""),
    ("sharegpt", '[\n{"conversations": [{"from": "gpt", "value": "hi"}]}\n]', "no usable prompt"),
    ("sharegpt", '[\n{"conversations": [\n{"from": "human", "value": "hi"}]}\n', "not closed"),
    ("sharegpt", '[\n{"conversations": [\n{"from": "human", "value": "hi",}]}]', "line 3: not valid JSON"),
]


@pytest.mark.parametrize("fmt, text, expected", BAD_ROWS)
def test_bad_datasets_are_one_line_errors_with_the_line(tmp_path, fmt, text, expected):
    path = tmp_path / "d.txt"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        _read(str(path), fmt)
    message = str(err.value)
    assert expected in message and str(path) in message and "\n" not in message


def test_sequential_dataset_is_handed_out_in_file_order_shared_by_users(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"prompt {i}", "max_tokens": i + 1}) + "\n" for i in range(5)))
    s = scenario(dataset={"path": str(path), "order": "sequential", "use_output_lengths": True})
    a, b = Workload(s, seed=1), Workload(s, seed=2)
    got = [w.next_request() for w in (a, b, a, b, a, b)]
    assert [messages(p)[-1]["content"] for p in got] == [f"prompt {i}" for i in (0, 1, 2, 3, 4, 0)]
    assert [orjson.loads(p.body)["max_tokens"] for p in got] == [1, 2, 3, 4, 5, 1]
    assert got[0].prompt_words == 2


def test_shuffle_uses_every_row_once_per_pass(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(20)))
    s = scenario(dataset={"path": str(path), "order": "shuffle"})
    w = Workload(s, stream_seed=99)
    first = [messages(w.next_request())[-1]["content"] for _ in range(20)]
    assert sorted(first) == sorted(f"p{i}" for i in range(20)) and first != [f"p{i}" for i in range(20)]


# -- prefixes, conversations, classes ----------------------------------------------------------


def test_shared_prefix_gives_groups_distinct_system_prompts_of_the_given_length():
    s = scenario(prompt_tokens={"mean": 8}, shared_prefix={"tokens": 30, "groups": 3})
    systems = Counter()
    for seed in range(4):
        w = Workload(s, seed=seed)
        for _ in range(30):
            system, user = messages(w.next_request())
            systems[system["content"]] += 1
            assert len(user["content"].split()) == 8
    assert len(systems) == 3 and all(len(text.split()) == 30 for text in systems)
    salted = Workload(s, salt="run7").next_request()
    assert messages(salted)[0]["content"] not in systems  # another run's salt: other prefixes


def test_conversation_resends_history_with_the_streamed_answer():
    s = scenario(prompt_tokens={"mean": 5}, conversation={"turns": 3})
    w = Workload(s, seed=0, user_tag="w-0")
    first = w.next_request()
    assert (first.turn, first.conversation_id, first.capture_text) == (1, "w-0-1", True)
    w.answered(True, "the streamed answer")
    second = w.next_request()
    assert messages(second)[:2] == messages(first) + [{"role": "assistant", "content": "the streamed answer"}]
    assert second.turn == 2 and second.prompt_words == 5 + 3 + 5
    assert w.think_time_s() == 0.0  # none asked for
    w.answered(False, None)  # a failed turn ends the conversation
    third = w.next_request()
    assert third.turn == 1 and third.conversation_id == "w-0-2" and len(messages(third)) == 1


def test_think_time_pauses_between_turns_only():
    w = Workload(scenario(conversation={"turns": 2, "think_time_s": 1.5}))
    w.next_request()
    w.answered(True, "a")
    assert w.think_time_s() == 1.5  # turn 2 follows
    w.next_request()
    w.answered(True, "b")
    assert w.think_time_s() == 0.0  # the next request starts a new conversation


def test_classes_are_drawn_by_weight_with_their_own_fields():
    s = scenario(max_tokens=8, classes=[{"name": "chat", "weight": 3}, {"name": "long", "weight": 1, "max_tokens": 99}])
    w = Workload(s, seed=5)
    drawn = [w.next_request() for _ in range(4000)]
    counts = Counter(p.class_name for p in drawn)
    assert 0.70 < counts["chat"] / 4000 < 0.80
    assert {orjson.loads(p.body)["max_tokens"] for p in drawn if p.class_name == "long"} == {99}
    assert {orjson.loads(p.body)["max_tokens"] for p in drawn if p.class_name == "chat"} == {8}
    assert all(p.turn is None and p.conversation_id is None for p in drawn)


def test_fingerprint_holds_dataset_hash_and_classes():
    s = parse_scenario({"name": "t", "load": {"levels": [1]}, "workload": {
        "dataset": {"path": str(DATA / "chat-prompts.jsonl")},
        "classes": [{"name": "a", "max_tokens": 3}, {"name": "b"}]}})
    fp = workload_fingerprint(s)
    assert fp["datasets"][0]["sha256"] == prepare(s)[0]["sha256"]
    assert fp["classes"] == [{"name": "a", "weight": 1.0, "overrides": ["max_tokens"]},
                             {"name": "b", "weight": 1.0, "overrides": []}]


# -- class SLOs and --slo overrides ---------------------------------------------------------------


RUN = {"scenario": {"workload": {"classes": [
    {"name": "chat", "slo": {"ttft_ms": {"p95": 300}, "max_error_rate": 0.02}},
    {"name": "batch", "slo": None},
]}}}


def test_class_slos_inherit_the_top_level_and_take_prefixed_overrides():
    top = SloSpec.from_dict({"itl_ms": {"p95": 50}, "max_error_rate": 0.01})
    top2, slos = class_slos(RUN, top, ["chat.ttft_ms.p95=200", "itl_ms.p95=40", "batch.e2e_ms.p99=9000"])
    assert top2.to_dict() == {"itl_ms": {"p95": 40.0}, "max_error_rate": 0.01}
    assert slos["chat"].to_dict() == {"ttft_ms": {"p95": 200.0}, "max_error_rate": 0.02}
    assert slos["batch"].to_dict() == {"itl_ms": {"p95": 40.0}, "e2e_ms": {"p99": 9000.0}, "max_error_rate": 0.01}


def test_an_unknown_class_prefix_is_a_clear_error():
    with pytest.raises(InputError, match="no request class named 'sumarize'"):
        split_overrides(["sumarize.e2e_ms.p95=1"], ["chat", "summarize"])
    assert split_overrides(["e2e_ms.p95=1"], ["chat"]) == (["e2e_ms.p95=1"], {})


#: A class's override is quoted whole: ``--slo chat.e2e_ms.p95=abc`` read "--slo 'e2e_ms.p95=abc'",
#: an override the user never typed (the class prefix was dropped before it was checked).
CLASS_MISTAKES = [
    ("chat.e2e_ms.p95=abc", "--slo 'chat.e2e_ms.p95=abc': expected a number, got 'abc'"),
    ("chat.e2e_ms.p97=3", "--slo 'chat.e2e_ms.p97=3': unknown percentile 'p97'"),
    ("batch.max_error_rate=2", "--slo 'batch.max_error_rate=2': an error rate is a fraction between 0 and 1"),
    ("chat.bogus.p95=3", "bad --slo override 'chat.bogus.p95=3': unknown metric 'bogus'"),
    ("chat.e2e_ms=3", "bad --slo override 'chat.e2e_ms=3': expected METRIC.PERCENTILE=LIMIT"),
    ("chat.e2e_ms.p95", "bad --slo override 'chat.e2e_ms.p95': expected METRIC.PERCENTILE=LIMIT"),
]


@pytest.mark.parametrize("override,message", CLASS_MISTAKES, ids=[o for o, _ in CLASS_MISTAKES])
def test_a_class_override_s_mistake_quotes_the_override_as_given(override, message):
    with pytest.raises(InputError) as err:
        class_slos(RUN, SloSpec.from_dict({"itl_ms": {"p95": 50}}), [override])
    assert str(err.value).startswith(message), err.value


def test_a_valid_output_floor_needs_a_run_that_asked_for_structured_output():
    """``analyze --slo min_valid_output_rate=…`` on a run whose answers were never checked judged
    nothing and passed every level; the scenario refuses the same floor in YAML."""
    top = SloSpec.from_dict({"itl_ms": {"p95": 50}})
    plain = {"scenario": {"workload": {"tools": None, "response_format": None, "classes": []}}}
    for override in ("min_valid_output_rate=0.9", "chat.min_valid_output_rate=0.9"):
        run = plain if "." not in override.partition("=")[0] else {"scenario": {"workload": {"classes": [{"name": "chat"}]}}}
        with pytest.raises(InputError, match="asked for no structured output"):
            class_slos(run, top, [override])
    structured = {"scenario": {"workload": {"classes": [
        {"name": "chat"}, {"name": "agent", "tools": [{"type": "function", "function": {"name": "f"}}]}]}}}
    top2, _ = class_slos(structured, top, ["min_valid_output_rate=0.9"])
    assert top2.min_valid_output_rate == 0.9
    assert class_slos(plain, top, ["itl_ms.p95=40"])[0].to_dict() == {"itl_ms": {"p95": 40.0}}


def test_a_class_slo_without_a_budget_keeps_the_top_level_budget():
    s = parse_scenario({"name": "t", "load": {"levels": [1]}, "slo": {"max_error_rate": 0.05},
                        "workload": {"classes": [{"name": "a", "slo": {"ttft_ms": {"p95": 1}}},
                                                 {"name": "b", "slo": {"max_error_rate": 0.2}}]}})
    assert [c.slo.max_error_rate for c in s.workload.classes] == [0.05, 0.2]


def test_completions_api_gets_prefix_and_history_as_one_prompt():
    s = parse_scenario({"name": "t", "load": {"levels": [1]}, "target": {"api": "completions"},
                        "workload": {"prompt_tokens": {"mean": 4}, "shared_prefix": {"tokens": 6},
                                     "conversation": {"turns": 2}}})
    w = Workload(s)
    first = orjson.loads(w.next_request().body)["prompt"]
    w.answered(True, "an answer")
    second = orjson.loads(w.next_request().body)["prompt"]
    prefix, message = first.split("\n\n")
    assert len(prefix.split()) == 6 and len(message.split()) == 4
    assert second.startswith(first + "\n\nan answer\n\n") and len(second.split()) == 6 + 4 + 2 + 4
