"""Time and peak memory of the analysis of a big run: requests.parquet → summary.json + report.html.

A synthetic run folder (run.json + requests.parquet, by default 100k requests
× 100 chunks = 10M chunk timestamps) is written first; generating it is not
timed. Then a fresh Python process runs ``analyze_run`` and
``write_reports(..., html=True)``, exactly what ``loadtest analyze`` does, and
reports how long they took. The analysis runs in its own process so that its
peak RSS is its own: the parent reaps it with ``os.wait4``, whose rusage
holds that one child's ``ru_maxrss`` (no other child can inflate it). The
run is generated in a process of its own too (see :func:`generate`).

    python benchmarks/bench_analyzer.py [--requests 100000] [--chunks 100] [--json PATH]

Goals (:data:`GOALS`): 10M timestamps in ≤ 10 s and ≤ 4 GB, and 100M
(``--requests 1000000 --chunks 100``, issue #31) in ≤ 30 s and ≤ 4 GB; the
last columns give the figures as ratios to the goal the run reaches (≤ 1
meets it). Wall time on a shared machine includes what other processes took,
so the child's own CPU time is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from _table import Column, format_table, write_json

TARGET_S = 10.0
TARGET_GB = 4.0
#: Goals by size: chunk timestamps → (seconds for analyze + reports, GB peak RSS). 10M is the
#: original target; 100M (a 3-hour soak at 200 streams) is issue #31's, reached by streaming
#: the chunk lists (loadtest/analysis/chunk_pass.py). A run is judged by the largest goal it reaches.
GOALS = {10_000_000: (TARGET_S, TARGET_GB), 100_000_000: (30.0, 4.0)}
#: Concurrency levels of the synthetic run, 60 s each (as tests/unit/test_analysis_scale.py).
LEVELS = [1, 2, 4, 8, 16, 32, 64, 128]
LEVEL_S = 60.0
SLO = {"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 80}, "max_error_rate": 0.01}


# -- the synthetic run (not timed) -----------------------------------------------------------


def build_run(run_dir: Path, n_requests: int, n_chunks: int, seed: int = 0) -> dict[str, Any]:
    """Write a run folder the analyzer cannot tell from a real one; return facts about it.

    ``chunk_sent_ms`` is made an empty list per row, as a run against a server
    that does not stamp chunks records it.
    """
    from loadtest.records import REQUESTS_PARQUET, SCHEMA, write_run_json

    # the synthetic-run builder is test code (tests/support/synthetic.py), not part of the package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support.synthetic import bulk_requests, level_plan, run_dict

    run_dir.mkdir(parents=True, exist_ok=True)
    levels = level_plan(LEVELS, LEVEL_S)
    frame = bulk_requests(n_requests, n_chunks, levels, seed=seed)
    table = pa.Table.from_pandas(frame, schema=SCHEMA, preserve_index=False)
    del frame
    empty = pa.ListArray.from_arrays(pa.array(np.zeros(n_requests + 1, dtype=np.int32)), pa.array([], pa.float64()))
    table = table.set_column(SCHEMA.get_field_index("chunk_sent_ms"), SCHEMA.field("chunk_sent_ms"), empty)
    path = run_dir / REQUESTS_PARQUET
    pq.write_table(table, path)
    write_run_json(run_dir, run_dict(levels, warmup_s=5.0, slo=SLO, name="bench-analyzer"))
    return {"rows": table.num_rows, "parquet_mb": path.stat().st_size / 2**20}


# -- the measured child ----------------------------------------------------------------------


def child_main(run_dir: Path, result_path: Path) -> None:
    """In the fresh process: import, analyze, write both reports; time each step."""
    t0 = time.perf_counter()
    from loadtest.analysis import analyze_run
    from loadtest.report import write_reports

    t1 = time.perf_counter()
    analysis = analyze_run(run_dir)
    t2 = time.perf_counter()
    paths = write_reports(run_dir, analysis, html=True)
    t3 = time.perf_counter()
    result = {
        "import_s": t1 - t0,
        "analyze_s": t2 - t1,
        "report_s": t3 - t2,
        "total_s": t3 - t1,
        "itl_samples": int(sum(lv.itl_ms.n for lv in analysis.levels)),
        "levels": len(analysis.levels),
        "html_mb": paths["html"].stat().st_size / 2**20,
    }
    result_path.write_text(json.dumps(result))


def run_child(run_dir: Path, work: Path, timeout_s: float) -> dict[str, Any]:
    """Run :func:`child_main` in a new interpreter; add its wall time and peak RSS."""
    result_path, log_path = work / "child.json", work / "child.log"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(run_dir), "--result", str(result_path)]
    started = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    watchdog = threading.Timer(timeout_s, proc.kill)
    watchdog.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, ru_maxrss included
    finally:
        watchdog.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        tail = "\n".join(log_path.read_text().splitlines()[-30:])
        raise RuntimeError(f"the analysis process exited with {proc.returncode}; its output ends with:\n{tail}")
    result = json.loads(result_path.read_text())
    result["process_s"] = wall
    result["peak_rss_mb"] = usage.ru_maxrss / 1024  # Linux reports kilobytes
    result["cpu_s"] = usage.ru_utime + usage.ru_stime  # the whole child, imports included: wall time less what others took
    return result


# -- output ----------------------------------------------------------------------------------

COLUMNS = [
    Column("requests", "requests", ",d"),
    Column("chunks", "chunks/req", "d"),
    Column("timestamps", "timestamps", ",d"),
    Column("parquet_mb", "parquet MB", ".1f"),
    Column("analyze_s", "analyze s", ".2f"),
    Column("report_s", "reports s", ".2f"),
    Column("total_s", "analyze+reports s", ".2f"),
    Column("import_s", "imports s", ".2f"),
    Column("process_s", "process s", ".2f"),
    Column("peak_rss_mb", "peak RSS MB", ".0f"),
    # added later, so that the columns above stay comparable with earlier results
    Column("cpu_s", "process CPU s", ".2f"),
    Column("goal", "goal", ""),
    Column("time_vs_goal", "time / goal", ".2f"),
    Column("rss_vs_goal", "RSS / goal", ".2f"),
]


def goal_for(timestamps: int) -> tuple[int, float, float]:
    """(size, seconds, GB) of the largest goal a run of ``timestamps`` reaches; the smallest below all."""
    size = max((s for s in GOALS if s <= timestamps), default=min(GOALS))
    return (size, *GOALS[size])


def judge(row: dict[str, Any]) -> None:
    """Add the goal and the figures' ratios to it (≤ 1 meets it) to ``row``."""
    size, seconds, gb = goal_for(row["timestamps"])
    row["goal"] = f"{size // 1_000_000}M: {seconds:g} s, {gb:g} GB"
    row["time_vs_goal"] = row["total_s"] / seconds
    row["rss_vs_goal"] = row["peak_rss_mb"] / 1024 / gb


def verdicts(row: dict[str, Any]) -> list[str]:
    size, seconds, gb = goal_for(row["timestamps"])
    time_ok = row["total_s"] <= seconds
    mem_ok = row["peak_rss_mb"] <= gb * 1024
    return [
        f"time   {row['total_s']:.2f} s (target ≤ {seconds:g} s at {size:,}): {row['total_s'] / seconds:.2f}× the goal, "
        f"{'met' if time_ok else 'NOT MET'}",
        f"memory {row['peak_rss_mb'] / 1024:.2f} GB (target ≤ {gb:g} GB at {size:,}): "
        f"{row['peak_rss_mb'] / 1024 / gb:.2f}× the goal, {'met' if mem_ok else 'NOT MET'}",
    ]


def report(row: dict[str, Any]) -> str:
    lines = ["analyzer: requests.parquet → summary.json + report.html, in a fresh process", format_table([row], COLUMNS)]
    size = goal_for(row["timestamps"])[0]
    note = "" if row["timestamps"] >= size else f" (targets are for {size // 1_000_000}M timestamps)"
    lines += [f"{line}{note}" for line in verdicts(row)]
    return "\n".join(lines)


# -- command line ----------------------------------------------------------------------------


def generate(run_dir: Path, n_requests: int, n_chunks: int, work: Path, timeout_s: float) -> dict[str, Any]:
    """:func:`build_run` in a process of its own, so that this one stays small.

    A child's ``ru_maxrss`` includes the memory its parent had when it forked
    (Linux records the pre-``exec`` high-water mark), and generating 100M
    timestamps leaves ~3.5 GB resident here; measured from this process, the
    analysis child would report that instead of its own peak.
    """
    facts_path = work / "facts.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--generate", str(run_dir), "--result", str(facts_path),
           "--requests", str(n_requests), "--chunks", str(n_chunks)]
    subprocess.run(cmd, check=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    return json.loads(facts_path.read_text())


def measure(n_requests: int, n_chunks: int, work: Path, timeout_s: float) -> dict[str, Any]:
    run_dir = work / "run"
    t0 = time.perf_counter()
    facts = generate(run_dir, n_requests, n_chunks, work, timeout_s)
    row = {
        "requests": n_requests,
        "chunks": n_chunks,
        "timestamps": n_requests * n_chunks,
        "parquet_mb": facts["parquet_mb"],
        "generate_s": time.perf_counter() - t0,
    }
    row.update(run_child(run_dir, work, timeout_s))
    judge(row)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--chunks", type=int, default=100, help="chunks per request")
    ap.add_argument("--timeout", type=float, default=600.0, metavar="S", help="kill the analysis after S seconds")
    ap.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.generate:
        args.result.write_text(json.dumps(build_run(args.generate, args.requests, args.chunks)))
        return 0
    if args.child:
        child_main(args.child, args.result)
        return 0
    if args.requests < 1 or args.chunks < 2:
        ap.error("--requests must be ≥ 1 and --chunks ≥ 2 (an ITL needs two chunks)")
    with tempfile.TemporaryDirectory(prefix="bench-analyzer-") as tmp:
        row = measure(args.requests, args.chunks, Path(tmp), args.timeout)
    print(report(row))
    if args.json:
        write_json(args.json, {
            "benchmark": "analyzer",
            "targets": {"total_s": TARGET_S, "peak_rss_gb": TARGET_GB},
            "goals": [{"timestamps": n, "total_s": t, "peak_rss_gb": gb} for n, (t, gb) in GOALS.items()],
            "rows": [row],
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
