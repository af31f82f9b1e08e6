"""The gate against a real llama-server: false alarms on the same server, detection of a real slowdown.

The same experiment as ``bench_gate_drift.py``, with the drift a real server
has: every run starts its own llama.cpp ``llama-server`` (the test suite's
tiny random-weight model, 1 thread, built by ``make real-server``; see
tests/support/realserver/), as a nightly job meets a freshly deployed server.

* **history**: ``--history-runs`` runs of the healthy server (``--slots`` slots);
* **same server**: ``--pairs`` more healthy runs, each compared with one history run;
* **fewer slots**: ``--detect`` runs of the same server with ``--slow-slots``
  slots (requests beyond them queue: TTFT and throughput at the top levels
  get worse, a real capacity regression);
* or, with ``--slow-layers N``, **a larger model**: the same server and slots with
  the tiny model built N blocks deep instead of 6 (8 blocks: about +20–25% per
  token on this machine), as when a deploy swaps in a bigger model or a slower build.

Each pair is judged at the default settings without and with ``--history``.

    python benchmarks/bench_gate_real.py [--history-runs 6] [--pairs 10] [--detect 5] [--slots 8]
                                         [--slow-slots 4 | --slow-layers 8] [--levels 1,4,8] [--level-duration 4]
                                         [--json PATH] [--keep DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _table import format_table, write_json  # noqa: E402
from bench_gate_drift import COLUMNS, run_case  # noqa: E402
from support.realserver.server import start_llama_server  # noqa: E402


def scenario(base_url: str, levels: list[int], level_duration: float) -> dict[str, Any]:
    return {
        "name": "gate-real-bench",
        "target": {"base_url": base_url, "model": "tiny-llama", "api": "chat", "timeout_s": 60},
        "workload": {"prompt_tokens": {"mean": 32, "stddev": 4}, "max_tokens": {"mean": 24, "stddev": 6}},
        "load": {"levels": levels, "level_duration_s": level_duration, "warmup_s": 1.0, "warmup_requests": 2,
                 "min_level_duration_s": level_duration},
        "slo": {"ttft_ms": {"p95": 5000}, "tpot_ms": {"p95": 1000}, "max_error_rate": 0.05},
    }


def one_run(work: Path, out: Path, slots: int, levels: list[int], level_duration: float,
            layers: int | None = None) -> Path:
    """One run against a freshly started llama-server; a kept run (``--keep``) is reused."""
    if (out / "summary.json").exists():
        return out
    folder = work / f"server-{out.name}"
    folder.mkdir(parents=True, exist_ok=True)
    server = start_llama_server(folder, slots=slots, layers=layers)
    try:
        path = work / "scenario.yaml"
        path.write_text(yaml.safe_dump(scenario(server.base_url, levels, level_duration)))
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "loadtest", "run", str(path), "--out", str(out),
                               "--no-server-metrics"], capture_output=True, text=True, timeout=900,
                              stdin=subprocess.DEVNULL)
    finally:
        server.stop()
    if done.returncode != 0:
        raise SystemExit(f"run {out} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    print(f"  {out.name}: {time.perf_counter() - started:.0f} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--history-runs", type=int, default=6)
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--detect", type=int, default=5)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--slow-slots", type=int, default=4)
    ap.add_argument("--slow-layers", type=int, default=0, metavar="N",
                    help="the slowdown is a deeper model (N blocks, the tiny model has 6), not fewer slots")
    ap.add_argument("--levels", default="1,4,8")
    ap.add_argument("--level-duration", type=float, default=4.0)
    ap.add_argument("--json", type=Path, metavar="PATH")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep the run folders here; runs already there are reused (re-judge without re-running)")
    args = ap.parse_args(argv)
    if args.history_runs < 4:
        ap.error("--history-runs: at least 4")
    levels = [int(x) for x in args.levels.split(",")]

    with tempfile.TemporaryDirectory(prefix="bench-gate-real-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        history_dir = work / "history"
        print(f"history: {args.history_runs} runs ({args.slots} slots)", flush=True)
        history = [one_run(work, history_dir / f"h{i:02d}", args.slots, levels, args.level_duration)
                   for i in range(args.history_runs)]
        slow = ((f"{args.slow_layers} layers", args.slots, args.slow_layers) if args.slow_layers
                else (f"{args.slow_slots} slots", args.slow_slots, None))
        cases = [("same server", args.slots, None, args.pairs), (*slow, args.detect)]
        rows: list[dict[str, Any]] = []
        details: list[dict[str, Any]] = []
        for case, slots, layers, count in cases:
            print(f"{case}: {count} runs", flush=True)

            def make(i: int, case: str = case, slots: int = slots, layers: int | None = layers) -> Path:
                return one_run(work, work / f"{case.replace(' ', '-')}-{i:02d}", slots, levels, args.level_duration,
                               layers)

            rows += run_case(case, "false alarms" if case == "same server" else "detected", count, make, history,
                             history_dir, details)
        made = len(history) + args.pairs + args.detect
        elapsed = time.perf_counter() - started

    print()
    print(format_table(rows, COLUMNS))
    print(f"\n{made} runs, {elapsed / 60:.1f} min")
    if args.json:
        write_json(args.json, {"config": vars(args) | {"json": str(args.json), "keep": str(args.keep)},
                               "rows": rows, "pairs": details})
    return 0


if __name__ == "__main__":
    sys.exit(main())
