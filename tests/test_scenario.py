"""Scenario validation: good files load, every mistake is one line naming the YAML path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.errors import InputError
from loadtest.scenario import load_scenario, parse_scenario

SCENARIOS = sorted((Path(__file__).parent.parent / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path):
    scenario = load_scenario(path)
    assert scenario.load.concurrency_levels()


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
    ({"name": "x", "load": {"levels": [1]}, "slo": {"itl_ms": {"p97": 3}}}, "slo.itl_ms: unknown percentile 'p97'"),
    ({"name": "x", "load": {"levels": [1]}, "targt": {}}, "targt: unknown key"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"timeout": 3}}, "target.timeout: unknown key"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"api": "embeddings"}}, "target.api: must be one of"),
    ({"name": "x", "load": {"levels": [1]}, "target": {"base_url": "localhost:8000"}}, "target.base_url: must start with http"),
    ({"name": "x", "load": {"start": 1, "step": 2}}, "load: 'start/step/max' needs all three; missing max"),
    ({"name": "x", "load": {"levels": [1], "warmup_s": 40, "level_duration_s": 30}}, "load: 'warmup_s' (40) must be shorter"),
    ({"name": "x", "load": {"levels": [1]}, "slo": {"max_error_rate": 2}}, "slo.max_error_rate: must be at most 1"),
    ({"load": {"levels": [1]}}, "name: is required"),
    ({"name": "x"}, "load: is required"),
]


@pytest.mark.parametrize("data,message", BAD, ids=[m for _, m in BAD])
def test_mistakes_name_the_yaml_path(data, message):
    with pytest.raises(InputError) as err:
        parse_scenario(data)
    text = str(err.value)
    assert message in text
    assert "\n" not in text


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


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadtest", *args], capture_output=True, text=True, timeout=60)


def test_validate_command_exit_codes(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nload:\n  levels: [1, 2, -4]\n")
    out = _cli("validate", str(bad))
    assert out.returncode == 2
    assert out.stderr.strip().endswith("load.levels[2]: must be a positive integer")
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1

    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [x\n")
    out = _cli("validate", str(broken))
    assert out.returncode == 2 and "line" in out.stderr and "Traceback" not in out.stderr

    out = _cli("validate", str(tmp_path / "missing.yaml"))
    assert out.returncode == 2 and "no such scenario file" in out.stderr

    out = _cli("validate", str(SCENARIOS[0]))
    assert out.returncode == 0, out.stderr
