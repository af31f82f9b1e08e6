"""The level judge in its own process answers exactly as the analysis does in-process."""

from __future__ import annotations

import pytest

from loadtest.analysis.decide import decide_level
from loadtest.analysis.slo import SloSpec
from support.synthetic import SAMPLE_SLO, write_sample_run
from loadtest.load.judge import JudgeError, JudgeProcess
from loadtest.records import read_requests, read_run_json


def test_the_judge_process_gives_the_in_process_verdict_and_fails_loudly(tmp_path):
    run_dir = write_sample_run(tmp_path / "run")
    run = read_run_json(run_dir)
    judge = JudgeProcess(run_dir, SAMPLE_SLO, 0.9875)
    try:
        for level in run["levels"]:
            expected = decide_level(read_requests(run_dir), run, SloSpec.from_dict(SAMPLE_SLO), level,
                                    level["end_wall"], 0.9875)
            got = judge.decide(run, level, level["end_wall"], {})
            assert got == expected, level["concurrency"]
        verdicts = {lv["concurrency"]: judge.decide(run, lv, lv["end_wall"], {}).verdict for lv in run["levels"]}
        assert verdicts[4] == "pass" and verdicts[8] == "fail"
        with pytest.raises(JudgeError):  # a look it cannot answer is an error for the caller, not a hang
            judge.decide(run, {"index": "not a level"}, 0.0, {})
    finally:
        judge.close()
    with pytest.raises(JudgeError):
        judge.decide(run, run["levels"][0], run["levels"][0]["end_wall"], {})
