"""``loadtest validate`` as a user runs it: a child process, its exit code and its one stderr line.

Moved from tests/unit/test_scenario.py and test_workload.py (they start a subprocess,
so they are not unit tests); what the messages say is checked in-process there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: asserts nothing about time (exit codes and messages, no clock): runs in make test's parallel pass
pytestmark = pytest.mark.untimed

SCENARIOS = sorted((Path(__file__).parents[2] / "scenarios").glob("*.yaml"))


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

    twice = tmp_path / "twice.yaml"  # a key given twice: YAML would keep the last, silently
    twice.write_text("name: x\nload:\n  levels: [1]\nload:\n  levels: [2]\n")
    out = _cli("validate", str(twice))
    assert out.returncode == 2 and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert f"{twice}: load: the key is given twice, at lines 2 and 4" in out.stderr, out.stderr

    out = _cli("validate", str(tmp_path / "missing.yaml"))
    assert out.returncode == 2 and "no such scenario file" in out.stderr

    out = _cli("validate", str(SCENARIOS[0]))
    assert out.returncode == 0, out.stderr


def test_a_level_no_fleet_could_run_is_refused_by_validate_with_its_path(tmp_path):
    """``levels: [1, 4, 99999999999999999999]`` passed validate (printed as ``1e+20``) and failed at run on
    the open-file limit without the YAML path; the bound (docs/scenarios.md, Limits) refuses it here."""
    huge = tmp_path / "huge.yaml"
    huge.write_text("name: x\nload:\n  levels: [1, 4, 99999999999999999999]\n")
    out = _cli("validate", str(huge))
    assert out.returncode == 2, out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"{huge}: load.levels[2]: must be at most 100000 users (got 99999999999999999999)" in lines[0]

    at_bound = tmp_path / "big.yaml"
    at_bound.write_text("name: x\nload:\n  levels: [1, 4, 100000]\n")
    out = _cli("validate", str(at_bound))
    assert out.returncode == 0, out.stderr
    assert "levels 1, 4, 100000," in out.stdout and "e+" not in out.stdout  # an int in full, never 1e+05


def test_a_missing_dataset_is_named_by_its_yaml_path_and_fails_validate(tmp_path):
    (tmp_path / "s.yaml").write_text(
        "name: s\nload: {levels: [1]}\nworkload: {dataset: {path: data/missing.jsonl}}\n"
    )
    result = subprocess.run([sys.executable, "-m", "loadtest", "validate", str(tmp_path / "s.yaml")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "workload.dataset.path: no such file" in result.stderr and "data/missing.jsonl" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_validate_says_where_the_load_would_go_and_whether_the_file_chose_it(tmp_path):
    """A scenario without target.base_url validated as "ok" without a word of where its load would
    go (the built-in mock's default address)."""
    bare = tmp_path / "bare.yaml"
    bare.write_text("name: bare\nload:\n  levels: [1]\n  level_duration_s: 10\n")
    out = _cli("validate", str(bare))
    assert out.returncode == 0, out.stderr
    assert "target: http://127.0.0.1:8000/v1 (chat, model mock-model): the default" in out.stdout
    chosen = tmp_path / "chosen.yaml"
    chosen.write_text("name: chosen\ntarget:\n  base_url: https://user:pw@llm.example/v1\n  model: m\n"
                      "load:\n  levels: [1]\n  level_duration_s: 10\n")
    out = _cli("validate", str(chosen))
    assert out.returncode == 0, out.stderr
    line = next(t for t in out.stdout.splitlines() if "target:" in t)
    assert "llm.example/v1 (chat, model m)" in line and "the default" not in line
    assert "pw" not in out.stdout  # the URL's password is not printed
