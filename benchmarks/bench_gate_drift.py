"""The gate on a server that drifts from run to run: false alarms and detection, with and without history.

A real staging server is a few percent faster or slower every time it runs
(warm-up, caches, CPU frequency, neighbours). ``loadtest mock --drift SD``
models that: each start of the mock multiplies every step cost by one factor
``exp(N(0, SD))``. Every run here is a real ``loadtest run`` against its own
start of a real mock (its own drift draw), every verdict a real ``loadtest
compare``:

* **history**: ``--history-runs`` runs of the healthy server;
* **same server**: ``--pairs`` more healthy runs, each the candidate of one
  pair whose baseline is one history run (in turn);
* **X% slower**: ``--detect`` runs per slowdown, the drift *and* the slowdown
  on top (B, S and the prefill cost times (1 + X)).

The candidates are made interleaved (same, 10%, 20%, same, …), so that a
machine whose load drifts during the benchmark meets every case alike.

Each pair is judged twice at the default settings (tolerance 5%): without
history (``compare BASE CAND``) and with it (``compare BASE CAND --history
DIR``, the other history runs). A pair whose gate exits 1 is an alarm (a false
one on the same server, a catch on a slower one); exit 6 (inconclusive) is
counted apart. Target: false alarms ≤ 5% with history.

    python benchmarks/bench_gate_drift.py [--drift 0.05] [--history-runs 8] [--pairs 16] [--detect 8]
                                          [--slowdowns 10,20] [--level-duration 3] [--json PATH] [--keep DIR]

The default makes 40 runs of about 15 s each (about 12 minutes; run it with ``nice``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import yaml

from _table import Column, format_table, write_json
from loadtest.mock.process import MockServer

BASE_MS, PER_SEQ_MS, PREFILL_MS = 10.0, 2.0, 0.02
OUTCOMES = {0: "pass", 1: "regression", 6: "inconclusive"}


def scenario(base_url: str, level_duration: float) -> dict[str, Any]:
    """A nightly-style sweep (1, 4, 8 users), full-length levels, ITL and TTFT SLOs far from the limits."""
    return {
        "name": "gate-drift-bench",
        "target": {"base_url": base_url, "model": "mock-model", "api": "chat", "timeout_s": 30},
        "workload": {"prompt_tokens": {"mean": 64, "stddev": 8}, "max_tokens": {"mean": 32, "stddev": 8}},
        "load": {"levels": [1, 4, 8], "level_duration_s": level_duration, "warmup_s": 1.0,
                 "warmup_requests": 2, "min_level_duration_s": level_duration},
        "slo": {"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 60}, "max_error_rate": 0.01},
    }


def mock_args(slowdown: float, drift: float, drift_seed: int) -> list[str]:
    k = 1.0 + slowdown
    return ["--decode-base-ms", f"{BASE_MS * k:g}", "--decode-per-seq-ms", f"{PER_SEQ_MS * k:g}",
            "--prefill-per-token-ms", f"{PREFILL_MS * k:g}", "--seed", "0",
            "--drift", f"{drift:g}", "--drift-seed", str(drift_seed)]


def one_run(work: Path, out: Path, slowdown: float, drift: float, drift_seed: int, level_duration: float) -> Path:
    """One run against its own start of the mock (its own drift draw); a kept run (``--keep``) is reused."""
    if (out / "summary.json").exists():
        return out
    with MockServer(mock_args(slowdown, drift, drift_seed)) as mock:
        path = work / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario(mock.base_url, level_duration)))
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "loadtest", "run", str(path), "--out", str(out)],
                              capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"run {out} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    print(f"  {out.name}: {time.perf_counter() - started:.0f} s", flush=True)
    return out


def judge(baseline: Path, candidate: Path, history: Path | None) -> tuple[str, str]:
    cmd = [sys.executable, "-m", "loadtest", "compare", str(baseline), str(candidate)]
    if history is not None:
        cmd += ["--history", str(history)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    outcome = OUTCOMES.get(done.returncode, f"exit {done.returncode}")
    headline = (done.stdout.strip().splitlines() or [done.stderr.strip()])[0]
    return outcome, headline


def run_case(case: str, what: str, count: int, make: Callable[[int], Path], history: list[Path],
             history_dir: Path, details: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``count`` candidates made by ``make(i)``, each judged against history run ``i`` (in turn)
    without and with ``--history``: one table row for each."""
    outcomes: dict[bool, Counter] = {False: Counter(), True: Counter()}
    for i in range(count):
        cand = make(i)
        base = history[i % len(history)]
        for with_history in (False, True):
            outcome, headline = judge(base, cand, history_dir if with_history else None)
            outcomes[with_history][outcome] += 1
            details.append({"case": case, "history": with_history, "baseline": base.name,
                            "candidate": cand.name, "outcome": outcome, "headline": headline})
    rows = []
    for with_history in (False, True):
        o = outcomes[with_history]
        rows.append({"case": case, "history": "yes" if with_history else "no", "pairs": count,
                     "regression": o["regression"], "inconclusive": o["inconclusive"], "pass": o["pass"],
                     "rate": f"{what} {o['regression']}/{count} ({100 * o['regression'] / count:.0f}%)"})
    return rows


COLUMNS = [
    Column("case", "case"),
    Column("history", "history"),
    Column("pairs", "pairs"),
    Column("regression", "exit 1"),
    Column("inconclusive", "exit 6"),
    Column("pass", "exit 0"),
    Column("rate", "rate", left=True),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drift", type=float, default=0.05, help="run-to-run drift SD of the mock (default 0.05)")
    ap.add_argument("--history-runs", type=int, default=8, help="healthy runs in the history (default 8)")
    ap.add_argument("--pairs", type=int, default=16, help="same-server pairs (default 16)")
    ap.add_argument("--detect", type=int, default=8, help="pairs per slowdown (default 8)")
    ap.add_argument("--slowdowns", default="10,20", help="slowdowns in percent (default 10,20)")
    ap.add_argument("--level-duration", type=float, default=3.0, help="seconds per level (default 3)")
    ap.add_argument("--json", type=Path, metavar="PATH")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep the run folders here; runs already there are reused (re-judge without re-running)")
    args = ap.parse_args(argv)
    if args.history_runs < 4:
        ap.error("--history-runs: at least 4 (a baseline plus the 3 runs the noise needs)")
    slowdowns = [float(s) for s in args.slowdowns.split(",") if s]

    with tempfile.TemporaryDirectory(prefix="bench-gate-drift-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        seed = 0
        history_dir = work / "history"
        print(f"history: {args.history_runs} runs (drift SD {args.drift:g})", flush=True)
        history = []
        for i in range(args.history_runs):
            seed += 1
            history.append(one_run(work, history_dir / f"h{i:02d}", 0.0, args.drift, seed, args.level_duration))
        cases: list[tuple[str, float, int]] = [("same server", 0.0, args.pairs)]
        cases += [(f"{s:g}% slower", s / 100.0, args.detect) for s in slowdowns]
        # Candidates interleaved (same, 10%, 20%, same, …): a shared machine's load drifts over a
        # benchmark, and blocks of one case would each meet a different machine.
        made: dict[str, list[Path]] = {case: [] for case, _, _ in cases}
        order = [(case, slowdown, i) for i in range(max(c for _, _, c in cases)) for case, slowdown, count in cases
                 if i < count]
        print(f"candidates: {len(order)} runs, interleaved", flush=True)
        for case, slowdown, i in order:
            seed += 1
            made[case].append(one_run(work, work / f"{case.split()[0]}-{i:02d}", slowdown, args.drift, seed,
                                      args.level_duration))
        rows: list[dict[str, Any]] = []
        details: list[dict[str, Any]] = []
        for case, slowdown, count in cases:
            rows += run_case(case, "false alarms" if slowdown == 0 else "detected", count,
                             lambda i, case=case: made[case][i], history, history_dir, details)
        elapsed = time.perf_counter() - started

    print()
    print(format_table(rows, COLUMNS))
    print(f"\n{seed} runs, {elapsed / 60:.1f} min")
    if args.json:
        write_json(args.json, {"config": {"drift": args.drift, "history_runs": args.history_runs, "pairs": args.pairs,
                                          "detect": args.detect, "slowdowns": slowdowns,
                                          "level_duration_s": args.level_duration},
                               "rows": rows, "pairs": details})
    return 0


if __name__ == "__main__":
    sys.exit(main())
