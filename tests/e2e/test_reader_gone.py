"""``loadtest run … | head``: the reader of stdout goes away, the run goes on to its summary.

A trial piped a run into ``head -3``: once ``head`` exited, the next print raised BrokenPipeError
and the run died after its level, with no summary.json, no report and no word (run.json said
complete). Here the test reads the run's first line and closes the pipe, as ``head -1`` does.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loadtest.mock.process import MockServer
from support.runkit import write_scenario

#: exit code and files only (untimed pass)
pytestmark = pytest.mark.untimed


def test_a_run_whose_stdout_reader_went_away_still_writes_its_summary(tmp_path):
    out = tmp_path / "run"
    with MockServer(["--decode-base-ms", "5", "--decode-per-seq-ms", "0"]) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, load={"levels": [1, 2], "level_duration_s": 2, "warmup_s": 0.5})
        proc = subprocess.Popen([sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        try:
            first = proc.stdout.readline()
            proc.stdout.close()  # `| head -1`: the reader is gone
            _, stderr = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert first, stderr[-2000:]
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["capacity"]["max_tested"] == 2 and (out / "report.html").is_file()
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr[-3000:]
