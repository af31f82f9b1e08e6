"""Scenario validation: good files load, every mistake is one line naming the YAML path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from loadtest.load.modes import load_mode
from loadtest.errors import InputError
from loadtest.scenario import load_scenario, parse_scenario

SCENARIOS = sorted((Path(__file__).parents[2] / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path):
    scenario = load_scenario(path)
    assert load_mode(scenario).levels()  # users, rates or speedups: the mode says which


def test_shipped_scenarios_include_the_documented_ones():
    assert {p.name for p in SCENARIOS} >= {"quickstart.yaml", "chat-capacity.yaml", "completions.yaml", "long-prompts.yaml"}


def test_start_step_max_generates_doubling_levels():
    s = parse_scenario({"name": "x", "load": {"start": 1, "step": 2, "max": 32}})
    assert s.load.concurrency_levels() == [1, 2, 4, 8, 16, 32]
    s = parse_scenario({"name": "x", "load": {"start": 4, "step": 4, "max": 16, "step_mode": "add"}})
    assert s.load.concurrency_levels() == [4, 8, 12, 16]


BAD = [
    ({"name": "x", "load": {"levels": [1, 2, -4]}}, "load.levels[2]: must be a positive integer"),
    ({"name": "x", "load": {"levels": [1, "a"]}}, "load.levels[1]: must be an integer"),
    ({"name": "x", "load": {"levels": [1], "start": 1}}, "load: give either 'levels' or 'start/step/max', not both"),
    ({"name": "x", "load": {"levels": [1], "level_duration_s": -3}}, "load.level_duration_s: must be a positive number"),
    ({"name": "x", "load": {"levels": [1]}, "slo": {"itl_ms": {"p97": 3}}}, "slo.itl_ms.p97: unknown percentile 'p97'"),
    ({"name": "x", "load": {"levels": [1]}, "slo": {"itl": {"p95": 3}}}, "slo.itl: unknown SLO metric"),
    ({"name": "x", "load": {"levels": [1]}, "targt": {}}, "targt: unknown key"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"timeout": 3}}, "target.timeout: unknown key"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"api": "classify"}}, "target.api: must be one of"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"base_url": "localhost:8000"}}, "target.base_url: must start with http"),
    # a host or port the client could not use: one line here, not a traceback when the first user connects
    ({"name": "x", "load": {"levels": [1]}, "target": {"base_url": "http://127.0.0.1:99999/v1"}},
     "target.base_url: is not a valid URL: Port out of range"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"base_url": "http://127.0.0.1:abc/v1"}},
     "target.base_url: is not a valid URL: Port could not be cast"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"base_url": "http://[::1/v1"}}, "target.base_url: is not a valid URL"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"base_url": "http:///v1"}}, "target.base_url: has no host"),
    ({"name": "x", "load": {"start": 1, "step": 2}}, "load: 'start/step/max' needs all three; missing max"),
    ({"name": "x", "load": {"levels": [1], "warmup_s": 40, "level_duration_s": 30}}, "load: 'warmup_s' (40) must be shorter"),
    ({"name": "x", "load": {"levels": [1]}, "slo": {"max_error_rate": 2}}, "slo.max_error_rate: an error rate is a fraction between 0 and 1"),
    ({"load": {"levels": [1]}}, "name: is required"),
    # numbers that YAML gives but a scenario cannot mean: a bool, an infinity, a falling sweep
    ({"name": "x", "load": {"levels": [1, True]}}, "load.levels[1]: must be an integer (got true)"),
    ({"name": "x", "load": {"levels": [1], "level_duration_s": float("inf")}}, "load.level_duration_s: must be a finite number"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"timeout_s": float("nan")}}, "target.timeout_s: must be a finite number"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"timeout_s": True}}, "target.timeout_s: must be a number (got true)"),
    ({"name": "x", "load": {"levels": [1], "arrival_seed": False}}, "load.arrival_seed: must be an integer (got false)"),
    ({"name": "x", "load": {"levels": [4, 2, 8]}}, "load.levels: must rise from one level to the next (4 then 2: the sweep falls)"),
    ({"name": "x", "load": {"levels": [2, 2]}}, "load.levels: must rise from one level to the next (2 then 2: the sweep repeats)"),
    ({"name": "x", "load": {"rates": [1, 0.5]}}, "load.rates: must rise from one level to the next (1 then 0.5"),
    ({"name": "x"}, "load: is required"),
    # every request names it: an empty one was sent, and the server's 400 ended the run after its preflight
    ({"name": "x", "load": {"levels": [1]}, "target": {"model": ""}}, "target.model: must not be empty"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"model": "  "}}, "target.model: must not be empty"),
    # past the bound on users and rates (MAX_USERS, MAX_RATE_RPS): a typo, named with its index
    ({"name": "x", "load": {"levels": [1, 4, 10**20]}}, "load.levels[2]: must be at most 100000 users (got 100000000000000000000)"),
    ({"name": "x", "load": {"start": 1, "step": 2, "max": 10**7}}, "load.max: must be at most 100000 users"),
    ({"name": "x", "load": {"rates": [1, 1e6]}}, "load.rates[1]: must be at most 100000 requests/s (got 1000000)"),
    ({"name": "x", "load": {"levels": [1], "max_in_flight": 10**6}}, "load.max_in_flight: must be at most 100000 users"),
]


@pytest.mark.parametrize("data,message", BAD, ids=[m for _, m in BAD])
def test_mistakes_name_the_yaml_path(data, message):
    with pytest.raises(InputError) as err:
        parse_scenario(data)
    text = str(err.value)
    assert message in text
    assert "\n" not in text


#: A field that may be a count or a mapping (``max_tokens: 64`` or ``{mean, stddev}``): pydantic
#: reports one error per member of the union, and that is one problem, said as one.
UNION = [
    (True, "workload.max_tokens: must be an integer or a mapping of keys (got true)"),
    (8.5, "workload.max_tokens: must be an integer or a mapping of keys (got 8.5)"),
    ("abc", "workload.max_tokens: must be an integer or a mapping of keys (got 'abc')"),
    (-3, "workload.max_tokens: must be a positive integer"),
    ({"mean": -16, "stddev": 4}, "workload.max_tokens.mean: must be a positive integer"),
    ({"mean": 16, "stdev": 4}, "workload.max_tokens.stdev: unknown key (did you mean 'stddev'?)"),
    ({"mean": "abc"}, "workload.max_tokens.mean: must be an integer (got 'abc')"),
]


@pytest.mark.parametrize("value,message", UNION, ids=[m for _, m in UNION])
def test_a_union_field_is_one_problem_said_by_the_member_that_fits(value, message):
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "x", "load": {"levels": [1]}, "workload": {"max_tokens": value}})
    assert str(err.value).endswith(message)


#: A length that is only a {mean, stddev} model (``prompt_tokens``) takes a number too, so a value of
#: neither type is said as the union ``max_tokens`` says it. A trial: ``prompt_tokens: "lots"`` read
#: "must be a mapping of keys", without the integer form or the value.
WRONG_LENGTH = [("lots", "'lots'"), (1.5, "1.5"), (True, "true"), ([1], "[1]")]


@pytest.mark.parametrize("value,shown", WRONG_LENGTH, ids=[s for _, s in WRONG_LENGTH])
@pytest.mark.parametrize("where", ["workload", "class", "query"])
def test_a_wrong_length_says_both_forms_and_the_value_as_max_tokens_does(where, value, shown):
    workload = {"workload": {"prompt_tokens": value},
                "class": {"classes": [{"name": "a", "prompt_tokens": value}]},
                "query": {"query_tokens": value}}[where]
    path = {"workload": "workload.prompt_tokens", "class": "workload.classes[0].prompt_tokens",
            "query": "workload.query_tokens"}[where]
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "x", "load": {"levels": [1]}, "workload": workload})
    assert str(err.value).endswith(f"{path}: must be an integer or a mapping of keys (got {shown})"), err.value
    with pytest.raises(InputError) as err:  # the same words as the union field's
        parse_scenario({"name": "x", "load": {"levels": [1]}, "workload": {"max_tokens": value}})
    assert str(err.value).endswith(f"workload.max_tokens: must be an integer or a mapping of keys (got {shown})")


def test_a_plain_number_is_a_length_without_spread_wherever_a_length_is_a_distribution():
    """``prompt_tokens: 1000`` was refused ("must be a mapping of keys") while ``max_tokens: 128`` was taken:
    a length given as a number is ``{mean: N, stddev: 0}`` in every {mean, stddev} field."""
    s = parse_scenario({"name": "x", "load": {"levels": [1]}, "target": {"api": "rerank"},
                        "workload": {"prompt_tokens": 1000, "query_tokens": 12,
                                     "classes": [{"name": "a", "weight": 1, "prompt_tokens": 50}]}})
    assert (s.workload.prompt_tokens.mean, s.workload.prompt_tokens.stddev) == (1000, 0.0)
    assert s.workload.prompt_tokens == parse_scenario(
        {"name": "x", "load": {"levels": [1]}, "workload": {"prompt_tokens": {"mean": 1000, "stddev": 0}}}).workload.prompt_tokens
    assert s.workload.query_tokens.mean == 12 and s.workload.classes[0].prompt_tokens.mean == 50
    for bad in (0, -5):  # named where it was written, not at a "mean" the file does not have
        with pytest.raises(InputError) as err:
            parse_scenario({"name": "x", "load": {"levels": [1]}, "workload": {"prompt_tokens": bad}})
        assert str(err.value).endswith("workload.prompt_tokens: must be a positive integer (a fixed length) or {mean, stddev}")


def test_a_second_field_is_still_counted():
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "x", "load": {"levels": [1]}, "workload": {"max_tokens": -3, "bogus": 1}})
    # an unknown key first: it is usually the cause of the others (and says which key to fix)
    assert str(err.value).endswith("workload.bogus: unknown key (and 1 more problem)")


def test_a_misspelt_key_is_named_first_with_the_key_it_misspells():
    """A trial: ``loads:`` read "load: is required (and 1 more problem)", the typo hidden in the count."""
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "x", "loads": {"levels": [1]}})
    assert str(err.value).endswith("loads: unknown key (did you mean 'load'?) (and 1 more problem)"), err.value
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "x", "load": {"levels": [1]}, "workload": {"max_token": 8}})
    assert str(err.value).endswith("workload.max_token: unknown key (did you mean 'max_tokens'?)"), err.value
    with pytest.raises(InputError) as err:  # nothing like it: no guess
        parse_scenario({"name": "x", "load": {"levels": [1]}, "workload": {"zzzqqq": 8}})
    assert str(err.value).endswith("workload.zzzqqq: unknown key"), err.value


def test_a_default_in_a_message_is_named_as_one():
    """``warmup_s (5) must be shorter than level_duration_s (4)``: the 5 was a default the user never wrote."""
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "x", "load": {"levels": [1], "level_duration_s": 4}})
    assert "'warmup_s' (5 by default) must be shorter than 'level_duration_s' (4)" in str(err.value)
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "x", "load": {"levels": [1], "level_duration_s": 4, "warmup_s": 6}})
    assert "'warmup_s' (6) must be shorter than 'level_duration_s' (4)" in str(err.value)


def test_overrides_are_validated():
    s = parse_scenario({"name": "x", "load": {"start": 1, "step": 2, "max": 8}})
    s2 = s.with_overrides(target="http://127.0.0.1:9/v1", levels=[3, 5], level_duration_s=10)
    assert s2.load.concurrency_levels() == [3, 5]
    assert s2.target.base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(InputError, match="target.base_url"):
        s.with_overrides(target="ftp://x")


def test_secret_headers_are_redacted():
    s = parse_scenario({"name": "x", "load": {"levels": [1]}, "target": {"headers": {"X-Api-Key": "sekrit", "X-Team": "a"}}})
    assert s.public_dict()["target"]["headers"] == {"X-Api-Key": "<redacted>", "X-Team": "a"}


# -- open loop (issue 15) -----------------------------------------------------------------

def _load(**load):
    return {"name": "x", "load": {"level_duration_s": 10, "warmup_s": 1, **load}}


@pytest.mark.parametrize(
    "load,message",
    [
        ({"levels": [1, 2], "rates": [1, 2]}, "load: give either 'levels' (closed loop) or 'rates' (open loop), not both"),
        ({"start": 1, "step": 2, "max": 8, "rate_max": 4}, "load: give either 'levels' (closed loop) or 'rates' (open loop)"),
        ({"rates": [1, 2], "rate_start": 1}, "load: give either 'rates' or 'rate_start/rate_step/rate_max'"),
        ({"rate_start": 1, "rate_max": 8}, "load: 'rate_start/rate_step/rate_max' needs all three; missing rate_step"),
        ({"rates": [1, 0]}, "load.rates[1]: must be a positive number"),
        ({"rates": [1], "arrival": "bursty"}, "load.arrival: must be one of"),
        ({"rates": [1], "burstiness": 0.5}, "load: 'burstiness' applies to 'arrival: gamma' only"),
        ({"rates": [1], "max_in_flight": 0}, "load.max_in_flight: must be a positive integer"),
        ({}, "load: give the load:"),
        ({}, "or with workload.trace 'speedups: [0.5, 1, 2]'"),  # a trace replay's load is named too
    ],
)
def test_open_loop_mistakes_are_one_line(load, message):
    with pytest.raises(InputError) as err:
        parse_scenario(_load(**load))
    text = str(err.value)
    assert message in text and "\n" not in text


def test_rate_levels_from_a_range_and_the_command_line_override():
    scenario = parse_scenario(_load(rate_start=1, rate_step=2, rate_max=8, arrival="gamma", burstiness=0.5))
    assert scenario.load.open_loop and scenario.load.rate_levels() == [1, 2, 4, 8]
    assert scenario.load.concurrency_levels() == []
    added = parse_scenario(_load(rate_start=0.5, rate_step=1.5, rate_max=5, step_mode="add")).load.rate_levels()
    assert added == [0.5, 2.0, 3.5, 5.0]
    closed = parse_scenario(_load(levels=[1, 2]))
    opened = closed.with_overrides(rates=[3, 6.5])
    assert opened.load.open_loop and opened.load.rate_levels() == [3, 6.5] and opened.load.levels is None
    assert not opened.with_overrides(levels=[4]).load.open_loop


def test_a_bad_name_is_told_what_its_own_pattern_allows():
    """A class name allows no '.', and its error said it did (one message for every pattern)."""
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "x y", "load": {"levels": [1]}})
    assert str(err.value).endswith("name: must be letters, digits, '.', '_' or '-'"), err.value
    with pytest.raises(InputError) as err:
        parse_scenario({"name": "x", "load": {"levels": [1]},
                        "workload": {"classes": [{"name": "a.b", "weight": 1}]}})
    assert str(err.value).endswith("workload.classes[0].name: must be letters, digits, '_' or '-'"), err.value


#: A key given twice in one mapping: YAML keeps the last silently, so the file is refused with the
#: key's YAML path and both lines. A trial: two ``load:`` blocks validated, and ran the second.
DUPLICATED = [
    ("name: x\nload:\n  levels: [1]\nload:\n  levels: [2]\n", "load: the key is given twice, at lines 2 and 4"),
    ("name: x\nload: {levels: [1]}\nslo:\n  ttft_ms: {p95: 500}\n  itl_ms: {p95: 50}\n  ttft_ms: {p95: 900}\n",
     "slo.ttft_ms: the key is given twice, at lines 4 and 6"),
    ("name: x\nload: {levels: [1]}\nworkload:\n  classes:\n    - {name: a}\n    - name: b\n      weight: 1\n      weight: 2\n",
     "workload.classes[1].weight: the key is given twice, at lines 7 and 8"),
    ("name: x\nload: {levels: [1]}\ntarget: {headers: {X-A: '1', X-A: '2'}}\n",
     "target.headers.X-A: the key is given twice, at line 3"),
]


@pytest.mark.parametrize("text,message", DUPLICATED, ids=[m.split(":")[0] for _, m in DUPLICATED])
def test_a_key_given_twice_is_refused_with_its_yaml_path_and_lines(tmp_path, text, message):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_scenario(path)
    assert str(err.value) == f"{path}: {message} (YAML would keep only the last, silently)"


def test_keys_that_only_look_alike_and_merged_keys_are_not_duplicates():
    """``1`` and ``"1"`` are two keys; a key after ``<<: *defaults`` overrides the merged one by design."""
    from loadtest.scenario._yaml import read_yaml

    assert read_yaml("a: {1: x, '1': y}\n") == {"a": {1: "x", "1": "y"}}
    assert read_yaml("d: &d {p95: 1, p99: 2}\ns:\n  <<: *d\n  p95: 3\n") == {
        "d": {"p95": 1, "p99": 2}, "s": {"p95": 3, "p99": 2}}
    with pytest.raises(yaml.YAMLError, match="d.p99: the key is given twice"):  # checked where the anchor is
        read_yaml("d: &d {p99: 1, p99: 2}\ns:\n  <<: *d\n")
