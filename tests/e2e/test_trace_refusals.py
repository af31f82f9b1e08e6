"""Bad traces and bad speedups as a user meets them: the real ``loadtest`` in a child process, its exit code, its one line.

Each refusal is exit 2 and one stderr line naming what and where, and leaves
nothing behind: no run folder (``loadtest run``), no output file
(``loadtest trace synth``). No load is sent: every check here comes before the
preflight, so the target's address is never reached.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.runkit import write_scenario

#: asserts nothing about time (exit codes, messages and files, no clock): runs in make test's parallel pass
pytestmark = pytest.mark.untimed

#: Never contacted (every refusal comes before the preflight); a closed port if something did.
NOWHERE = "http://127.0.0.1:9/v1"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadtest", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd, stdin=subprocess.DEVNULL)


def one_line(result: subprocess.CompletedProcess) -> str:
    """The refusal's line, after checking it is one line, exit 2, no traceback."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def mooncake(path: Path, stamps_ms: list[int]) -> Path:
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": 8, "output_length": 2}) + "\n" for t in stamps_ms))
    return path


def test_a_bad_trace_is_refused_before_the_run_folder_is_made(tmp_path):
    """The trace was first read for run.json, after the folder was made: exit 2 and the right line,
    but an empty run folder left behind, with ``--out`` and in the default ``reports/``."""
    trace = mooncake(tmp_path / "backwards.jsonl", [0, 2000, 1000, 3000])
    scenario = write_scenario(tmp_path, NOWHERE, workload={"trace": {"path": str(trace), "format": "mooncake"}},
                              load={"levels": None, "speedups": [1, 2]})
    out = tmp_path / "run"
    line = one_line(cli("run", str(scenario), "--out", str(out)))
    assert line.endswith("workload.trace: " + f"{trace}: line 3: timestamp goes backwards (earlier than line 2); "
                         "sort the file, or set workload.trace.sort: true to sort the window"), line
    assert not out.exists()
    work = tmp_path / "cwd"
    work.mkdir()
    one_line(cli("run", str(scenario), cwd=work))
    assert list(work.iterdir()) == []  # no reports/test-<stamp>/ either


def test_a_speedup_whose_rate_passes_the_open_loop_bound_is_refused(tmp_path):
    """A speedup's rate is the window's mean × the speedup, held to the 100,000 req/s that ``rates`` are
    (speedups were not: ``[1, 50000]`` of a 4 req/s window, 200,000 req/s, passed ``validate``).
    Of a 2 req/s window 50000× is the bound itself and passes; 50001× is refused, by its index."""
    trace = mooncake(tmp_path / "t.jsonl", [0, 500, 1000, 1500])  # 4 rows over 2 s (3 gaps stretched by one): 2 req/s
    scenario = write_scenario(tmp_path, NOWHERE, workload={"trace": {"path": str(trace), "format": "mooncake"}},
                              load={"levels": None, "speedups": [1, 50000, 50001]})
    line = one_line(cli("validate", str(scenario)))
    assert line.endswith("load.speedups[2]: 50001× the trace window (2 req/s at 1×) is 100002 requests/s; a level is at "
                         "most 100000 requests/s: more than any fleet of workers sends, so a typo (see 'Limits' in "
                         "docs/scenarios.md)"), line
    out = tmp_path / "run"
    assert "load.speedups[2]" in one_line(cli("run", str(scenario), "--out", str(out))) and not out.exists()


def test_synth_refusals_leave_no_file_and_name_the_flag(tmp_path):
    """An empty trace left a 0-byte output; a negative spread was blamed on three flags at once."""
    out = tmp_path / "x.jsonl"
    line = one_line(cli("trace", "synth", str(out), "--rate", "0.001", "--duration-s", "1"))
    assert line.endswith(f"{out}: --rate 0.001 × --duration-s 1 drew 0 request(s); a trace needs at least 2 "
                         "(raise --rate or --duration-s); nothing written"), line
    assert list(tmp_path.iterdir()) == []
    line = one_line(cli("trace", "synth", str(out), "--rate", "4", "--duration-s", "5", "--input-stddev", "-3"))
    assert "argument --input-stddev: must be zero or more" in line and "--output-stddev" not in line, line
    # every row in one millisecond: the reader refuses the file (no rate), which is then not left behind,
    # and a file already there is kept as it was
    out.write_text("kept\n")
    line = one_line(cli("trace", "synth", str(out), "--rate", "5000", "--duration-s", "0.0004"))
    assert f"{out}: the window's 2 usable requests are all at one time" in line, line
    assert out.read_text() == "kept\n" and sorted(p.name for p in tmp_path.iterdir()) == ["x.jsonl"]


def test_a_trace_with_every_row_at_one_time_is_refused(tmp_path):
    """It replayed at an invented 1 request/s (1 s per row), which nothing documented."""
    trace = mooncake(tmp_path / "same.jsonl", [0, 0, 0])
    scenario = write_scenario(tmp_path, NOWHERE, workload={"trace": {"path": str(trace), "format": "mooncake"}},
                              load={"levels": None, "speedups": [1, 2]})
    line = one_line(cli("validate", str(scenario)))
    assert line.endswith(f"workload.trace: {trace}: the window's 3 usable requests are all at one time (lines 1 to 3); "
                         "a trace window needs rows at two or more distinct times to have a rate"), line
