"""The gate refuses to compare runs of different workloads: before any load, and after two runs.

Moved out of test_compare_e2e.py, whose same-server repeats run alone on the cores: a refusal
(exit 2, one line) follows from the two runs' fingerprints, never from how fast they ran.
"""

from __future__ import annotations

import pytest

from loadtest.mock.process import MockServer
from support.runkit import loadtest
from test_compare_e2e import MOCK, PER_SEQ_MS, SECTIONS, _run, _scenario

#: asserts nothing about time (exit codes and the refusal's line): runs in make test's untimed pass
pytestmark = pytest.mark.untimed

#: one short level: the runs only need to finish, and to carry their workload's fingerprint
SHORT = {"levels": [2], "level_duration_s": 2, "warmup_s": 0.5, "min_level_duration_s": 2}


def test_different_max_tokens_is_refused(tmp_path):
    longer = {**SECTIONS["workload"], "max_tokens": {"mean": 12, "stddev": 3}}
    with MockServer([*MOCK, "--decode-per-seq-ms", str(PER_SEQ_MS)]) as mock:
        base = tmp_path / "base"
        done = _run(tmp_path, mock.base_url, base, load=SHORT)
        assert done.returncode == 0, done.stderr
        # --baseline refuses before sending any load ...
        scenario = _scenario(tmp_path, "http://127.0.0.1:9/v1", workload=longer, load=SHORT)
        early = loadtest("run", str(scenario), "--out", str(tmp_path / "never"), "--baseline", str(base))
        assert early.returncode == 2, early.stderr
        assert "max_tokens" in early.stderr and len(early.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "never").exists()
        # ... and compare refuses two finished runs.
        out = tmp_path / "longer"
        result = _run(tmp_path, mock.base_url, out, workload=longer, load=SHORT)
        assert result.returncode == 0, result.stderr
    refused = loadtest("compare", str(base), str(out))
    assert refused.returncode == 2
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1 and "max_tokens.mean: 8 → 12" in line and "Traceback" not in line
