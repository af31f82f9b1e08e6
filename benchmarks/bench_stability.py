"""Same server, same scenario, run after run: is the capacity the same, and never above the truth?

Each case runs ``loadtest run --refine`` N times against a fresh ``loadtest
mock`` whose capacity under the case's SLO is known from its model (README,
"Capacity by hand"), and prints every run's capacity, its wall time from
start to answer, the levels it ran and how many of them were extended.

* ``itl5``: ITL = 10 + 20 × users ms, SLO ``itl_ms.p95 ≤ 120``: 5 users give
  110 ms, 6 give 130 ms. Truth 5.
* ``ttft8``: 8 slots (``--max-batch 8``), SLO ``ttft_ms.p95 ≤ 150``: a 9th
  user waits for a slot for a large part of a whole request. Truth 8.
* ``ttft6``: the same with 6 slots. Truth 6.
* ``itl9``: ITL = 20 + 18 × users ms (issue 23's server), 16-token answers, SLO
  ``itl_ms.p95 ≤ 191``: 9 users give 182 ms, 10 give 200 ms. Truth 9.

Both use 15 s levels, as the peers' published comparisons do, with
``min_level_duration_s: 4`` so that decided levels end early; the sweep is
1, 2, 4, 8, 16. Targets (issue 9): every run gives the truth, none is ever
above it, and the mean wall time to the answer is ≤ 60 s (GuideLLM's goodput
search takes 113 s and 177 s on the same cases, AIPerf's 231 s and 276 s).

Each row also gives the wall time from ``loadtest run`` to its answer; the
hold (issue 23) and the looks that wait for enough requests are in it.

    python benchmarks/bench_stability.py [--runs 5] [--cases itl5,ttft8,ttft6,itl9] [--json PATH] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from _table import Column, format_table, write_json

# Locust (imported by the mock helper's package) patches the standard library; do it first.
import locust  # noqa: F401,E402

from loadtest.mock.process import MockServer  # noqa: E402

CASES: dict[str, dict[str, Any]] = {
    "itl5": {
        "truth": 5,
        "mock": ["--decode-base-ms", "10", "--decode-per-seq-ms", "20", "--prefill-per-token-ms", "0"],
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 12},
        "slo": {"itl_ms": {"p95": 120}, "max_error_rate": 0.01},
    },
    "ttft8": {
        "truth": 8,
        "mock": ["--max-batch", "8", "--decode-base-ms", "10", "--decode-per-seq-ms", "2", "--prefill-per-token-ms", "0"],
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 32},
        "slo": {"ttft_ms": {"p95": 150}, "max_error_rate": 0.01},
    },
    "ttft6": {
        "truth": 6,
        "mock": ["--max-batch", "6", "--decode-base-ms", "10", "--decode-per-seq-ms", "2", "--prefill-per-token-ms", "0"],
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 32},
        "slo": {"ttft_ms": {"p95": 150}, "max_error_rate": 0.01},
    },
    "itl9": {
        "truth": 9,
        "mock": ["--decode-base-ms", "20", "--decode-per-seq-ms", "18", "--prefill-per-token-ms", "0"],
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 16},
        "slo": {"itl_ms": {"p95": 191}, "max_error_rate": 0.01},
    },
}

LOAD = {"levels": [1, 2, 4, 8, 16], "level_duration_s": 15, "warmup_s": 1, "min_level_duration_s": 4,
        "warmup_requests": 2}


def run_once(case: str, spec: dict[str, Any], work: Path, i: int) -> dict[str, Any]:
    with MockServer(spec["mock"]) as mock:
        scenario = {
            "name": f"{case}-{i}",
            "target": {"base_url": mock.base_url, "model": "mock-model", "api": "chat", "timeout_s": 30},
            "workload": spec["workload"],
            "load": LOAD,
            "slo": spec["slo"],
        }
        path = work / f"{case}-{i}.yaml"
        path.write_text(yaml.safe_dump(scenario))
        out = work / f"{case}-{i}"
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "loadtest", "run", str(path), "--out", str(out), "--refine"],
            capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - started
    if result.returncode != 0:
        return {"case": case, "run": i + 1, "error": result.stderr.strip().splitlines()[-1:]}
    summary = json.loads((out / "summary.json").read_text())
    run = json.loads((out / "run.json").read_text())
    cap = summary["capacity"]
    levels = run["levels"]
    return {
        "case": case,
        "run": i + 1,
        "truth": spec["truth"],
        "capacity": cap["concurrency"],
        "upper_bound": cap["upper_bound"],
        "verdict": cap["verdict"],
        "wall_s": round(wall, 1),
        "levels": " ".join(str(lv["concurrency"]) for lv in levels),
        "extended": sum(1 for lv in levels if (lv.get("decision") or {}).get("extended")),
        "undecided": sum(1 for lv in levels if (lv.get("decision") or {}).get("ended") == "undecided_at_max"),
    }


COLUMNS = [
    Column("case", "case"), Column("run", "run"), Column("truth", "truth"), Column("capacity", "capacity"),
    Column("upper_bound", "upper bound"), Column("verdict", "verdict", left=True), Column("wall_s", "wall s", ".1f"),
    Column("extended", "extended"), Column("undecided", "undecided"), Column("levels", "levels run", left=True),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", type=Path, metavar="PATH")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="keep the run folders here (default: a temporary one)")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-stability-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for case in args.cases.split(","):
            for i in range(args.runs):
                row = run_once(case, CASES[case], work, i)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print(format_table(rows, COLUMNS))
    summary = {}
    for case in args.cases.split(","):
        mine = [r for r in rows if r["case"] == case and "capacity" in r]
        right = sum(1 for r in mine if r["capacity"] == r["truth"])
        above = sum(1 for r in mine if r["capacity"] is not None and r["capacity"] > r["truth"])
        mean_wall = sum(r["wall_s"] for r in mine) / len(mine) if mine else None
        summary[case] = {"runs": len(mine), "right": right, "above_truth": above, "mean_wall_s": mean_wall}
        print(f"{case}: {right}/{len(mine)} runs give the truth, {above} above it, "
              f"mean wall time to the answer {mean_wall:.1f} s" if mine else f"{case}: no run finished")
    if args.json:
        write_json(args.json, {"rows": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
