"""The regression gate on an open loop end to end: real mock servers, rate levels, the real ``loadtest`` command.

The mock's decode step lasts ``B + S × running`` ms. At a fixed offered rate ``R`` with ``T`` tokens a
request, the requests running settle where ``running = R × T × (B + S × running) / 1000`` (Little's
law). With B = 10, S = 5 and T = 8 that is 0.38 running at 4 req/s (a step of 11.9 ms) and 0.94 at 8
req/s (14.7 ms); with S = 10, 0.47 and 1.78 (14.7 and 27.8 ms): +24% and +89% a token, far past the 5%
tolerance, while both servers keep up with the rate (so it is the latency checks that fail, not the
capacity). The same mock, run again, must not be flagged; the history is a few runs of it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from loadtest.mock.process import MockServer
from support.runkit import loadtest, write_scenario

pytestmark = pytest.mark.solo

MOCK = ["--decode-base-ms", "10", "--prefill-per-token-ms", "0"]
PER_SEQ_MS = 5.0
SECTIONS = {
    "name": "rates",
    "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": {"mean": 8, "stddev": 3}},
    # Rate levels of a fixed length: the gate needs the samples, not only the SLO's verdict.
    "load": {"levels": None, "rates": [4, 8], "arrival": "poisson", "level_duration_s": 4, "warmup_s": 0.5,
             "min_level_duration_s": 4},
    "slo": {"tpot_ms": {"p50": 1000}, "itl_ms": {"p50": 1000}, "max_error_rate": 0.5},
}
HISTORY = 4


def _run(folder, base_url, out, *extra):
    scenario = write_scenario(folder, base_url, **SECTIONS)
    return loadtest("run", str(scenario), "--out", str(out), *extra)


def test_a_slower_server_fails_at_a_rate_against_the_history_of_the_same_one(tmp_path):
    history = tmp_path / "history"
    with MockServer([*MOCK, "--decode-per-seq-ms", f"{PER_SEQ_MS:g}"]) as mock:
        runs = []
        for i in range(HISTORY):
            done = _run(tmp_path, mock.base_url, history / f"night-{i}")
            assert done.returncode == 0, done.stderr
            runs.append(history / f"night-{i}")
    # the same server: never a regression (its last run against the first, the others its noise)
    same = loadtest("compare", str(runs[0]), str(runs[-1]), "--history", str(history), "--json", str(tmp_path / "same.json"))
    report = json.loads((tmp_path / "same.json").read_text())
    assert same.returncode != 1 and report["counts"]["regression"] == 0, same.stdout
    assert report["load_mode"] == "open_loop" and report["history_runs"] == HISTORY - 1
    assert {c["level"] for c in report["checks"] if c["level"] is not None} == {4.0, 8.0}

    with MockServer([*MOCK, "--decode-per-seq-ms", f"{2 * PER_SEQ_MS:g}"]) as mock:
        junit = tmp_path / "gate.xml"
        slow = _run(tmp_path, mock.base_url, tmp_path / "slow", "--baseline", str(runs[0]), "--history", str(history),
                    "--junit", str(junit))
    assert slow.returncode == 1, slow.stdout + slow.stderr
    failing = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase") if case.find("failure") is not None]
    # +89% a token at 8 req/s
    assert any(name.startswith(("tpot_ms.p50 @ 8 req/s", "itl_ms.p50 @ 8 req/s")) for name in failing), failing
    assert not any(" users" in name for name in failing), failing
    report = json.loads((tmp_path / "slow" / "compare.json").read_text())
    assert report["outcome"] == "regression" and report["load_mode"] == "open_loop"
    assert "req/s" in (tmp_path / "slow" / "compare.md").read_text()
