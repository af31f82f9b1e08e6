"""The regression gate's error rates: false alarms on same-server pairs, detection of slowdowns.

Every run is a real ``loadtest run`` against a real ``loadtest mock``; every
verdict is a real ``loadtest compare``. The mock models a continuous-batching
engine whose decode step lasts ``B + S × running`` ms; a slowdown of x% scales
B, S and the prefill cost by (1 + x), so ITL, TPOT and TTFT grow by about x%
at every level while the workload stays the same.

* **False alarms**: ``--pairs`` + 1 runs against the same mock (same
  scenario, same seed); each consecutive pair is compared. A pair whose gate
  says *regression* (exit 1) is a false alarm. Target: 0 in 20.
* **Detection**: for each slowdown, ``--detect`` runs against the slower mock,
  each compared with a different same-server run as its baseline. A pair the
  gate calls *regression* is detected.
* **History**: ``--history-runs`` more same-server runs, made first, are the
  run-to-run noise: every pair is judged without and with ``--history`` (the
  ``history`` column). Without it no latency or throughput change is a
  regression (the noise is unknown: inconclusive), so the "no" rows count only
  what still fails without one: a certain capacity drop, or a rate of errors.

Comparisons are cheap (no load), so every pair is judged at each tolerance in
``--tolerances``: a 5% slowdown cannot be "worse than a 5% tolerance", so it is
only expected to be caught at a tighter one, where false alarms are likelier.
Inconclusive verdicts (exit 6) are counted apart: neither an alarm nor a catch.

    python benchmarks/bench_gate.py [--pairs 20] [--detect 10] [--slowdowns 5,10,20] [--history-runs 4]
                                    [--tolerances 5,2.5] [--level-duration 4] [--json PATH] [--keep DIR]

The default run makes 55 runs of about 20 s each (about 18 minutes).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from _table import Column, format_table, write_json
from loadtest.mock.process import MockServer

BASE_MS, PER_SEQ_MS, PREFILL_MS = 10.0, 2.0, 0.02
OUTCOMES = {0: "pass", 1: "regression", 6: "inconclusive"}


def scenario(base_url: str, level_duration: float) -> dict[str, Any]:
    """A nightly-style sweep: 1 to 16 users, ITL and TTFT SLOs (capacity 8 by formula: ITL at 16 is 42 ms)."""
    return {
        "name": "gate-bench",
        "target": {"base_url": base_url, "model": "mock-model", "api": "chat", "timeout_s": 30},
        "workload": {"prompt_tokens": {"mean": 64, "stddev": 8}, "max_tokens": {"mean": 32, "stddev": 8}},
        # The default client self-check: a level where the load generator was starved (on a shared
        # machine, often) is flagged, and the gate will not call a regression there.
        # Full-length levels (not cut short once decided): the gate needs samples for the change.
        "load": {"levels": [1, 4, 8, 16], "level_duration_s": level_duration, "warmup_s": 1.0,
                 "warmup_requests": 2, "min_level_duration_s": level_duration},
        "slo": {"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 40}, "max_error_rate": 0.01},
    }


def mock_args(slowdown: float) -> list[str]:
    k = 1.0 + slowdown
    return ["--decode-base-ms", f"{BASE_MS * k:g}", "--decode-per-seq-ms", f"{PER_SEQ_MS * k:g}",
            "--prefill-per-token-ms", f"{PREFILL_MS * k:g}", "--seed", "0"]


def make_runs(work: Path, slowdown: float, count: int, level_duration: float, tag: str) -> list[Path]:
    """``count`` runs of the scenario against one mock slowed by ``slowdown``, in ``work/tag-NN``."""
    outs = []
    with MockServer(mock_args(slowdown)) as mock:
        path = work / f"{tag}.yaml"
        path.write_text(yaml.safe_dump(scenario(mock.base_url, level_duration)))
        for i in range(count):
            out = work / f"{tag}-{i:02d}"
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "loadtest", "run", str(path), "--out", str(out)],
                                  capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                raise SystemExit(f"run {out} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
            print(f"  {out.name}: {time.perf_counter() - started:.0f} s", flush=True)
            outs.append(out)
    return outs


def judge(baseline: Path, candidate: Path, tolerance: float, history: Path | None = None) -> tuple[str, str]:
    extra = ["--history", str(history)] if history is not None else []
    done = subprocess.run(
        [sys.executable, "-m", "loadtest", "compare", str(baseline), str(candidate), "--tolerance", f"{tolerance:g}%",
         *extra],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )
    outcome = OUTCOMES.get(done.returncode, f"exit {done.returncode}")
    headline = (done.stdout.strip().splitlines() or [done.stderr.strip()])[0]
    return outcome, headline


COLUMNS = [
    Column("case", "case"),
    Column("tolerance_pct", "tolerance %", "g"),
    Column("pairs", "pairs"),
    Column("regression", "regression"),
    Column("inconclusive", "inconclusive"),
    Column("pass", "pass"),
    Column("rate", "rate", left=True),
    Column("history", "history", left=True),  # added last: earlier tables stay comparable
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20, help="same-server pairs (default 20)")
    ap.add_argument("--detect", type=int, default=10, help="pairs per slowdown (default 10)")
    ap.add_argument("--slowdowns", default="5,10,20", help="slowdowns in percent (default 5,10,20)")
    ap.add_argument("--tolerances", default="5,2.5", help="gate tolerances in percent (default 5,2.5)")
    ap.add_argument("--history-runs", type=int, default=4,
                    help="same-server runs made first, as --history (default 4; 0: judge without only)")
    ap.add_argument("--level-duration", type=float, default=4.0, help="seconds per level (default 4)")
    ap.add_argument("--json", type=Path, metavar="PATH")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="keep the run folders here")
    args = ap.parse_args(argv)
    slowdowns = [float(s) for s in args.slowdowns.split(",") if s]
    tolerances = [float(t) for t in args.tolerances.split(",") if t]
    needed = max(args.pairs + 1, args.detect)

    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        history = None
        if args.history_runs:
            print(f"history: {args.history_runs} same-server runs", flush=True)
            history = work / "history"
            history.mkdir(exist_ok=True)
            make_runs(history, 0.0, args.history_runs, args.level_duration, "h")
        print(f"same server: {needed} runs", flush=True)
        same = make_runs(work, 0.0, needed, args.level_duration, "same")
        slow = {}
        for s in slowdowns:
            print(f"{s:g}% slower: {args.detect} runs", flush=True)
            slow[s] = make_runs(work, s / 100.0, args.detect, args.level_duration, f"slow{s:g}")

        rows, details = [], []
        for tol in tolerances:
            cases = [("same server", [(same[i], same[i + 1]) for i in range(args.pairs)], "false alarms")]
            cases += [(f"{s:g}% slower", list(zip(same, slow[s])), "detected") for s in slowdowns]
            for case, pairs, what in cases:
                for with_history in ([False, True] if history is not None else [False]):
                    outcomes = Counter()
                    for base, cand in pairs:
                        outcome, headline = judge(base, cand, tol, history if with_history else None)
                        outcomes[outcome] += 1
                        details.append({"case": case, "tolerance_pct": tol, "baseline": base.name,
                                        "candidate": cand.name, "history": with_history,
                                        "outcome": outcome, "headline": headline})
                    n = len(pairs)
                    rows.append({"case": case, "tolerance_pct": tol, "pairs": n, "regression": outcomes["regression"],
                                 "inconclusive": outcomes["inconclusive"], "pass": outcomes["pass"],
                                 "rate": f"{what} {outcomes['regression']}/{n}",
                                 "history": "yes" if with_history else "no"})
        elapsed = time.perf_counter() - started

    print()
    print(format_table(rows, COLUMNS))
    runs = args.history_runs + len(same) + sum(len(v) for v in slow.values())
    print(f"\n{runs} runs, {elapsed / 60:.1f} min")
    if args.json:
        write_json(args.json, {"config": {"pairs": args.pairs, "detect": args.detect, "slowdowns": slowdowns,
                                          "history_runs": args.history_runs,
                                          "tolerances": tolerances, "level_duration_s": args.level_duration},
                               "rows": rows, "pairs": details})
    return 0


if __name__ == "__main__":
    sys.exit(main())
