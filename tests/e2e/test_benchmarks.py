"""The benchmarks run at tiny sizes and give rows with the expected keys and sane values.

Not a performance test (this machine may be busy): only that each script still
runs end to end, writes its ``--json`` and measures what it claims, so the
benchmarks do not rot between the times someone runs them at full size.
"""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def run_bench(script: str, tmp: Path, *args: str, timeout: float = 90) -> dict[str, Any]:
    """Run a benchmark script as ``make bench`` would; return its ``--json`` payload."""
    out = tmp / f"{Path(script).stem}.json"
    result = subprocess.run(
        [sys.executable, str(BENCH / script), *args, "--json", str(out)],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.strip(), "the table is printed"
    return json.loads(out.read_text())


def finite(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


@pytest.fixture(scope="module")
def fidelity(tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("fidelity")
    # A request lasts ~1 s (100 tokens at 10 ms): 3 s levels hold a whole round past the warmup.
    return run_bench("bench_fidelity.py", tmp, "--streams", "1,4", "--level-duration", "3", "--warmup", "0.5", "--modes", "single")


@pytest.fixture(scope="module")
def client_cpu(tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("client_cpu")
    return run_bench("bench_client_cpu.py", tmp, "--seconds", "1", "--streams", "10", "--chunks", "20", "--floor")


@pytest.fixture(scope="module")
def analyzer(tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("analyzer")
    return run_bench("bench_analyzer.py", tmp, "--requests", "2000", "--chunks", "20")


@pytest.mark.solo  # the measured ITL p50 within 2 ms of the mock's 10
def test_fidelity_rows_measure_the_mock_truth(fidelity):
    rows = fidelity["rows"]
    assert [(r["mode"], r["streams"]) for r in rows] == [("single", 1), ("single", 4)]
    for r in rows:
        assert r["requests"] >= 1 and r["gaps"] >= 50, r
        # The mock sends a chunk every 10 ms whatever the concurrency.
        assert abs(r["true_itl_p50_ms"] - 10.0) < 0.5, r
        assert abs(r["itl_p50_ms"] - 10.0) < 2.0, r
        assert finite(r["err_p50_ms"], r["err_p99_ms"], r["err_max_ms"], r["lag_p50_ms"], r["lag_p99_ms"]), r
        assert 0 <= r["err_p50_ms"] <= r["err_p99_ms"] <= r["err_max_ms"] < 1000, r
        # Arrival after send on one clock: the lag is positive, and small on loopback.
        assert 0 < r["lag_p50_ms"] < 50, r
        assert finite(r["cpu_pct"], r["loop_lag_p99_ms"], r["reader_batch_p99_ms"], r["stamp_delay_p99_ms"]), r
        assert isinstance(r["saturated"], bool) and r["verdict"]
        assert r["stamp_delay_ms"]["0.5"] <= r["stamp_delay_ms"]["0.99"] <= r["stamp_delay_ms"]["max"]
    summary = fidelity["summary"]
    assert summary["levels_passed"] + summary["levels_flagged"] == 2
    assert isinstance(summary["calibration_failures"], list)


@pytest.mark.solo  # its run feeds test_run_all_picks_headlines_from_the_payloads, which is solo
def test_client_cpu_rows(client_cpu):
    rows = client_cpu["rows"]
    assert {(r["mode"], r["path"]) for r in rows} == {(m, p) for m in ("paced", "burst") for p in ("loadtest", "naive")}
    for r in rows:
        assert r["chunks"] > 0 and r["chunks"] % 20 == 0, r  # whole requests of 20 chunks
        assert finite(r["cpu_us_per_chunk"], r["chunks_per_s"]) and r["cpu_us_per_chunk"] > 0, r
        naive = next(n for n in rows if (n["mode"], n["path"]) == (r["mode"], "naive"))
        assert r["cpu_vs_naive"] == pytest.approx(r["cpu_us_per_chunk"] / naive["cpu_us_per_chunk"]), r
    assert set(client_cpu["ratios"]) == {"paced", "burst"}
    # the C floor (a compiler is there: the scanner is built with it), against the same paced server
    floor = client_cpu["floor"]
    assert floor["chunks"] > 0 and floor["reads_per_wake"] > 0 and finite(floor["cpu_us_per_chunk"]), floor
    naive = next(r for r in rows if (r["mode"], r["path"]) == ("paced", "naive"))
    assert floor["cpu_vs_naive"] == pytest.approx(floor["cpu_us_per_chunk"] / naive["cpu_us_per_chunk"])


@pytest.mark.solo  # its run feeds test_run_all_picks_headlines_from_the_payloads, which is solo
def test_analyzer_row(analyzer):
    (row,) = analyzer["rows"]
    assert row["timestamps"] == 40_000
    assert row["levels"] == 8
    assert 30_000 < row["itl_samples"] < 40_000  # 19 gaps per request, minus those in warmup
    assert finite(row["analyze_s"], row["report_s"], row["total_s"], row["process_s"])
    assert 0 < row["total_s"] < row["process_s"]
    assert 50 < row["peak_rss_mb"] < 4096  # an interpreter with pandas, far below the target


@pytest.fixture
def run_all(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("run_all")


@pytest.mark.solo  # shares the fidelity run (a module fixture runs once per pass)
def test_run_all_picks_headlines_from_the_payloads(run_all, fidelity, client_cpu, analyzer):
    items = {h.name: h for h in run_all.headlines({"client_cpu": client_cpu, "fidelity": fidelity, "analyzer": analyzer})}
    paced = items["client CPU per chunk vs naive (paced)"]
    assert paced.value == pytest.approx(client_cpu["ratios"]["paced"])
    assert paced.status.startswith("n/a")  # a 1 s run, not the target's 5 s
    assert items["|ITL error| p99, single @ 100 streams"].status == "not measured"  # tiny run: 1 and 4 streams
    calibration = items["self-check-passed levels with p99 |error| > 5 ms"]
    assert calibration.value == len(fidelity["summary"]["calibration_failures"])
    assert items["analyzer peak RSS"].status.startswith("n/a")  # 40k timestamps, not the target's 10M
    table = run_all.format_table(run_all.table_rows(list(items.values())), run_all.COLUMNS)
    assert len(table.splitlines()) == 1 + len(items)


@pytest.fixture(scope="module")
def selfcheck(tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("selfcheck")
    return run_bench("bench_selfcheck.py", tmp, "--streams", "1,4", "--level-duration", "3", "--warmup", "0.5",
                     "--chunks", "1", "--protos", "http", "--modes", "single", timeout=120)


def test_selfcheck_matrix_classifies_every_level(selfcheck, run_all):
    rows = selfcheck["rows"]
    assert [(r["proto"], r["k"], r["streams"]) for r in rows] == [("http", 1, 1), ("http", 1, 4)]
    for r in rows:
        assert r["outcome"] in ("hit", "ok", "FALSE ALARM", "MISS")
        assert r["flagged"] == (r["bound_ms"] >= selfcheck["delta_ms"])
        assert r["large"] == (r["err_p99_ms"] >= selfcheck["delta_ms"])
    assert sum(v for k, v in selfcheck["matrix"].items() if k in ("hit", "ok", "FALSE ALARM", "MISS")) == 2
    items = {h.name: h for h in run_all.headlines({"selfcheck": selfcheck})}
    assert items["self-check misses (verdict could flip, not flagged)"].value == selfcheck["matrix"]["MISS"]


@pytest.mark.untimed
def test_run_all_reports_a_failed_benchmark(run_all):
    items = run_all.headlines({"analyzer": None}, {"analyzer": "exit code 1"})
    assert [h.status for h in items] == ["benchmark failed", "benchmark failed"]


@pytest.mark.untimed
def test_run_all_picks_the_gate_figures_at_the_default_tolerance(run_all):
    rows = [
        {"case": "same server", "tolerance_pct": 5.0, "pairs": 20, "regression": 0, "inconclusive": 3, "pass": 17},
        {"case": "10% slower", "tolerance_pct": 5.0, "pairs": 10, "regression": 9, "inconclusive": 1, "pass": 0},
        {"case": "same server", "tolerance_pct": 2.5, "pairs": 20, "regression": 2, "inconclusive": 3, "pass": 15},
    ]
    items = {h.name: h for h in run_all.headlines({"gate": {"rows": rows}})}
    assert items["gate false alarms (same server)"].value == 0
    assert items["gate false alarms (same server)"].status == "met"
    assert items["gate detection, 10% slower"].value == 9
    assert items["gate detection, 10% slower"].status.startswith("n/a")
    few = run_all.gate_headlines({"rows": [dict(rows[0], pairs=5)]})[0]
    assert few.status.startswith("n/a")  # fewer pairs than the target's 20 are shown, not judged
    # judged with and without --history: the figures are the history's (without one no speed change
    # is a regression, so its zero false alarms would prove nothing)
    both = [dict(rows[0], history="no"), dict(rows[0], history="yes", regression=2, **{"pass": 16}),
            dict(rows[1], history="no", regression=0, inconclusive=10), dict(rows[1], history="yes", regression=7)]
    items = {h.name: h for h in run_all.gate_headlines({"rows": both})}
    alarms = items["gate with history, false alarms (same server)"]  # its 5% budget: 2 of 20 is past it
    assert alarms.value == pytest.approx(10.0) and alarms.unit == "%" and alarms.status != "met"
    assert items["gate detection, 10% slower"].value == 7


def test_scale_and_soak_run_end_to_end(tmp_path):
    """Tiny sizes: the server sees the users asked for; the soak samples memory and the folder."""
    scale = run_bench("bench_scale.py", tmp_path, "--users", "40", "--workers", "0", "--seconds", "8",
                      "--warmup", "3", timeout=120)
    (row,) = scale["rows"]
    assert row["exit_code"] == 0 and row["samples"] >= 5
    assert row["server_in_flight_median"] >= 0.9 * 40, row
    soak = run_bench("bench_soak.py", tmp_path, "--minutes", "0.3", "--settle", "5", "--every", "1",
                     "--streams", "10", timeout=150)
    res = soak["result"]
    assert res["measured"] and res["exit_code"] == 0 and res["requests"] > 50, res
    assert res["rss_1min_mb"] > 20 and res["folder_end_mb"] > 0
    assert len(soak["samples"]) >= 10 and all(s["rss_mb"] > 0 for s in soak["samples"])


@pytest.mark.untimed
def test_run_all_judges_the_fault_scale_and_soak_figures(run_all):
    rows = [{"fault": "cut", "streams": 100, "ok": True, "server_seen": 3000, "missing": 0},
            {"fault": "hang", "streams": 100, "ok": False, "server_seen": 3000, "missing": 2}]
    (faults,) = run_all.faults_headlines({"rows": rows})
    assert faults.value == 1 and faults.status == "NOT MET" and "hang@100" in faults.detail
    (scale,) = run_all.scale_headlines({"rows": [{"users": 1000, "workers": 2, "share": 0.985,
                                                   "server_in_flight_median": 985}]})
    assert scale.value == 1.5 and scale.status == "met"
    soak = {"result": {"measured": True, "minutes": 30.0, "rss_growth_after_1min": 0.12, "rss_1min_mb": 200,
                       "rss_end_mb": 224, "folder_linearity": 1.01}}
    (rss,) = run_all.soak_headlines(soak)
    assert rss.value == 12.0 and rss.status == "NOT MET"
    short = run_all.soak_headlines({"result": {**soak["result"], "minutes": 2.0}})[0]
    assert short.status.startswith("n/a")
