"""The gate on a drifting mock, a few pairs (benchmarks/bench_gate_drift.py measures the rates over many).

Each run gets its own start of ``loadtest mock --drift 0.05`` (a server about
5% faster or slower every start, on top of what two shared cores add): with a
history of such runs a same-server candidate passes the gate (exit 0), and a
server 50% slower fails it (exit 1): a clear regression on top of the drift.
benchmarks/bench_gate_drift.py measures the rates over many pairs.
"""

from __future__ import annotations

import json

import pytest

from loadtest.mock.process import MockServer
from support.runkit import loadtest, write_scenario

pytestmark = pytest.mark.solo

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
    assert code == 0, report["headline"]
    assert report["history_runs"] == len(HISTORY_SEEDS)
    assert all(c["noise"] == "history" for c in report["checks"] if c["level"] is not None and c["kind"] == "latency")
    code, report = judged["slow"]
    if code == 6:
        # On a busy host the gate holds a level rather than blame the server (the host_contended rule,
        # older than the noise): then every held check must be one the noise alone would have failed.
        held = [c for c in report["checks"] if c["holds_gate"]]
        assert held and all("host running the load generator was busy" in c["message"] for c in held), report["headline"]
        assert all(c["change"] > c["noise_ci"][1] for c in held if c["kind"] == "latency"), report["headline"]
        return
    assert code == 1, report["headline"]
    failing = [c for c in report["checks"] if c["fails_gate"]]
    # a regression is outside the run-to-run noise, on the worse side
    assert all(c["change"] > c["noise_ci"][1] for c in failing if c["kind"] == "latency")
    assert any("judged together" in w for w in report["warnings"])


@pytest.mark.untimed
def test_run_all_reads_the_drift_benchmark_rate_with_history(monkeypatch):
    """benchmarks/run_all.py's figure: false alarms with history as a share (target ≤ 5%), judged
    only over 20 pairs or more; detection shown without a target."""
    import importlib
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    run_all = importlib.import_module("run_all")
    rows = [{"case": "same server", "history": "no", "pairs": 24, "regression": 9, "inconclusive": 0},
            {"case": "same server", "history": "yes", "pairs": 24, "regression": 2, "inconclusive": 1},
            {"case": "20% slower", "history": "yes", "pairs": 12, "regression": 9, "inconclusive": 0}]
    figures = run_all.gate_drift_headlines({"rows": rows})
    alarms = next(h for h in figures if "false alarms" in h.name)
    assert alarms.value == 100 * 2 / 24 and alarms.status == "NOT MET"
    one_in_24 = run_all.gate_drift_headlines({"rows": [dict(rows[1], regression=1)]})
    assert [h.status for h in one_in_24] == ["met"]
    detect = next(h for h in figures if "20% slower" in h.name)
    assert detect.value == 75.0 and detect.status.startswith("n/a")
