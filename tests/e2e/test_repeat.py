"""``run --repeat K`` with its warm-up run, gated as a group against a real mock."""

from __future__ import annotations

import json

import pytest

from loadtest.mock.process import MockServer
from support.runkit import GATE_VERDICTS, loadtest, write_scenario

#: asserts nothing about time: which runs a --repeat keeps and gates, and that the group gets a
#: verdict, whichever. The gate's verdict on same-server runs (exit 0 or 6, never 1) is judged alone
#: on the cores by test_compare_e2e.py and test_gate_drift.py: beside the untimed pass a neighbour
#: once moved one run's ITL p95 by +18.5%. So this runs in make test's untimed pass.
pytestmark = pytest.mark.untimed

SECTIONS = {
    "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": {"mean": 8, "stddev": 3}},
    "load": {"levels": [2], "level_duration_s": 3, "warmup_s": 0.5, "min_level_duration_s": 3},
}


def test_repeat_keeps_every_run_marks_the_warmup_and_gates_the_group(tmp_path):
    with MockServer(["--decode-base-ms", "10", "--prefill-per-token-ms", "0"]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, **SECTIONS)
        first = loadtest("run", str(scenario), "--out", str(tmp_path / "base"))
        assert first.returncode == 0, first.stderr
        assert not (tmp_path / "base-warmup").exists()  # no --baseline: no warm-up run by default
        out = tmp_path / "nightly"
        done = loadtest("run", str(scenario), "--out", str(out), "--repeat", "2", "--baseline", str(tmp_path / "base"),
                        "--history", str(tmp_path), timeout=300)
    assert done.returncode in GATE_VERDICTS, done.stdout + done.stderr  # a verdict: not 2 (refused) or a crash
    assert json.loads((out / "warmup" / "run.json").read_text())["warmup_run"] is True
    for name in ("run-01", "run-02"):
        assert json.loads((out / name / "run.json").read_text())["warmup_run"] is False
        assert (out / name / "summary.json").is_file()
    report = json.loads((out / "compare.json").read_text())
    assert report["outcome"] == GATE_VERDICTS[done.returncode]
    assert [p.rsplit("/", 1)[-1] for p in report["candidates"]] == ["run-01", "run-02"]
    # the reference runs: the baseline only (the warm-up and the candidates are never counted)
    assert report["history_runs"] == 1
    assert (out / "compare.junit.xml").is_file() and (out / "compare.md").is_file()
    # history leaves the warm-up run out
    hist = loadtest("history", str(tmp_path), "--html", str(tmp_path / "h.html"), "--json", str(tmp_path / "h.json"))
    assert hist.returncode == 0, hist.stderr
    runs = json.loads((tmp_path / "h.json").read_text())["runs"]
    assert len(runs) == 3 and not any(r["run"].endswith("warmup") for r in runs)


def test_bad_repeat_is_one_line_before_any_load(tmp_path):
    scenario = write_scenario(tmp_path, "http://127.0.0.1:9/v1", **SECTIONS)
    done = loadtest("run", str(scenario), "--out", str(tmp_path / "x"), "--repeat", "0")
    assert done.returncode == 2 and "--repeat 0" in done.stderr and len(done.stderr.strip().splitlines()) == 1
