"""The README's CI example (examples/nightly-regression.yml), its steps run by bash as written.

Moved out of test_compare_e2e.py: the same-server verdict is judged there, alone on the cores;
here the subject is the workflow's steps (the first night without a baseline, a gated night, the
job summary, the outputs, the verdict step for each exit code), which any verdict exercises.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadtest.mock.process import MockServer
from support.runkit import GATE_VERDICTS
from test_compare_e2e import MOCK, PER_SEQ_MS, _scenario

#: asserts nothing about time (files, outputs and exit codes; any gate verdict): make test's untimed pass
pytestmark = pytest.mark.untimed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "nightly-regression.yml"


def _step_script(workflow: dict, name: str, values: dict[str, str]) -> str:
    """A step's shell script with the ``${{ … }}`` expressions the test stands in for."""
    step = next(s for s in workflow["jobs"]["gate"]["steps"] if s.get("name", "").startswith(name))
    script = step["run"]
    for expr, value in values.items():
        script = script.replace("${{ " + expr + " }}", value)
    assert "${{" not in script, script
    return script


def test_the_ci_example_runs_as_written(tmp_path):
    """The workflow's gate step, run by bash as written: first night (no baseline), then a gated night."""
    workflow = yaml.safe_load(EXAMPLE.read_text())
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    with MockServer([*MOCK, "--decode-per-seq-ms", str(PER_SEQ_MS)]) as mock:
        # one short level: the workflow's steps, not the verdict, are judged here
        scenario = _scenario(tmp_path, mock.base_url,
                             load={"levels": [2], "level_duration_s": 2, "warmup_s": 0.5, "min_level_duration_s": 2})
        env = {**os.environ, "SCENARIO": str(scenario), "BASELINE": str(tmp_path / "baseline"),
               "HISTORY": str(tmp_path / "reports"),
               "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(output), "PYTHONPATH": os.pathsep.join(sys.path)}
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env["PATH"]
        script = _step_script(workflow, "Run the scenario", {"secrets.STAGING_URL": mock.base_url,
                                                              "vars.MODEL": "mock-model"})
        nights = []
        for night in ("first", "second"):
            run_dir = tmp_path / "reports" / night
            done = subprocess.run(["bash", "-e", "-c", script], env={**env, "RUN_DIR": str(run_dir)},
                                  capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, done.stderr
            nights.append(output.read_text().strip().splitlines()[-1])
            if night == "first":
                assert "No baseline" in summary.read_text() and not (run_dir / "compare.json").exists()
                shutil.copytree(run_dir, tmp_path / "baseline")  # what committing the artifact does
    # The second night is gated. Its verdict is not this test's subject (test_compare_e2e.py judges
    # same-server runs alone on the cores): any verdict may come, and the step must publish it.
    assert nights[0] == "code=0" and nights[1] in {f"code={c}" for c in GATE_VERDICTS}, nights
    assert (tmp_path / "reports" / "second" / "compare.junit.xml").is_file()
    # A baseline that is there but cannot be read stops the night before any run (exit 2 for the
    # Verdict step to fail on): taken for "no baseline", the night would run without the gate.
    broken = tmp_path / "broken-baseline"
    shutil.copytree(tmp_path / "baseline", broken)
    (broken / "run.json").write_text("{not json")
    run_dir = tmp_path / "reports" / "broken"
    done = subprocess.run(["bash", "-e", "-c", script], env={**env, "BASELINE": str(broken), "RUN_DIR": str(run_dir)},
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert output.read_text().strip().splitlines()[-1] == "code=2" and not run_dir.exists()
    assert "run.json" in done.stderr, done.stderr
    assert "loadtest compare" in summary.read_text()  # the Markdown went to the job summary
    for code, step_exit in (("0", 0), ("6", 0), ("1", 1), ("2", 1)):
        verdict = _step_script(workflow, "Verdict", {"steps.gate.outputs.code": code})
        done = subprocess.run(["bash", "-e", "-c", verdict], capture_output=True, text=True)
        assert done.returncode == step_exit, (code, done.stdout)
        assert ("::warning::" in done.stdout) == (code == "6")
