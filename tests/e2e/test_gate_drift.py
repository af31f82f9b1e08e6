"""The gate on a drifting mock, a few pairs (benchmarks/bench_gate_drift.py measures the rates over many).

Each run gets its own start of ``loadtest mock --drift 0.05`` (a server about
5% faster or slower every start, on top of what two shared cores add): with a
history of such runs a same-server candidate must not fail the gate, and a
server 50% slower must, while without history the same pairs are judged by one
run's intervals alone.
"""

from __future__ import annotations

import json

from loadtest.mock.process import MockServer
from support.runkit import loadtest, write_scenario

SECTIONS = {
    "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": {"mean": 12, "stddev": 3}},
    "load": {"levels": [2, 4], "level_duration_s": 3, "warmup_s": 0.5, "min_level_duration_s": 3},
    "slo": {"tpot_ms": {"p50": 1000}, "itl_ms": {"p50": 1000}, "max_error_rate": 0.5},
}
HISTORY_SEEDS = [11, 12, 13, 14]


def _run(tmp_path, out, seed, slowdown=1.0):
    args = ["--decode-base-ms", f"{10 * slowdown:g}", "--decode-per-seq-ms", f"{5 * slowdown:g}",
            "--prefill-per-token-ms", "0", "--drift", "0.05", "--drift-seed", str(seed)]
    with MockServer(args) as mock:
        scenario = write_scenario(tmp_path, mock.base_url, **SECTIONS)
        done = loadtest("run", str(scenario), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_history_holds_back_a_drifting_server_and_still_catches_a_slow_one(tmp_path):
    history = [_run(tmp_path, tmp_path / "history" / f"h{i}", seed) for i, seed in enumerate(HISTORY_SEEDS)]
    same = _run(tmp_path, tmp_path / "same", 21)
    slow = _run(tmp_path, tmp_path / "slow", 22, slowdown=1.5)
    judged = {}
    for name, cand in (("same", same), ("slow", slow)):
        done = loadtest("compare", str(history[0]), str(cand), "--history", str(tmp_path / "history"),
                        "--json", str(tmp_path / f"{name}.json"))
        judged[name] = (done.returncode, json.loads((tmp_path / f"{name}.json").read_text()))
    code, report = judged["same"]
    assert code != 1, report["headline"]
    assert report["history_runs"] == len(HISTORY_SEEDS)
    assert all(c["noise"] == "history" for c in report["checks"] if c["level"] is not None and c["kind"] == "latency")
    code, report = judged["slow"]
    assert code == 1, report["headline"]
    failing = [c for c in report["checks"] if c["fails_gate"]]
    # a regression is outside the run-to-run noise, on the worse side
    assert all(c["change"] > c["noise_ci"][1] for c in failing if c["kind"] == "latency")
