"""Open-loop fidelity: how late do scheduled sends go out?

An open-loop level is only as good as its schedule: a request that leaves
late carries the client's delay in its latency (TTFT is measured from the
scheduled time). This runs ``loadtest run`` with Poisson arrivals at each
``--rates`` level against ``loadtest mock`` (fast and wide enough never to be
the bottleneck), in one process and with ``--workers 2``, and prints the send
lag (actual send − scheduled time) per level: p50, p99, max, and how many
sends were later than 10 ms (the rule that marks a level ``client_saturated``
when more than 1% of its sends are).

    python benchmarks/bench_schedule_lag.py [--rates 50,200,500] [--level-duration 6] [--modes single,workers2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from _table import Column, format_table, write_json
from loadtest.mock.process import MockServer

MODES = {"single": [], "workers2": ["--workers", "2"]}


def run_mode(base_url: str, mode: str, rates: list[float], level_s: float, work: Path) -> list[dict]:
    scenario = {
        "name": f"lag-{mode}",
        "target": {"base_url": base_url, "model": "mock-model", "timeout_s": 30, "metrics": False},
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 8},
        "load": {"rates": rates, "arrival": "poisson", "max_in_flight": 512, "level_duration_s": level_s,
                 "warmup_s": 1, "warmup_requests": 0, "min_level_duration_s": level_s,
                 "max_level_duration_s": level_s},
        "slo": {"max_error_rate": 1.0},
    }
    path = work / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = work / mode
    subprocess.run([sys.executable, "-m", "loadtest", "run", str(path), "--out", str(out), *MODES[mode]],
                   check=True, capture_output=True, timeout=120 + 3 * level_s * len(rates))
    summary = json.loads((out / "summary.json").read_text())
    rows = []
    for level in summary["levels"]:
        loop = level["open_loop"] or {}
        lag = loop.get("schedule_lag_ms") or {}
        n = lag.get("n") or 0
        rows.append({
            "mode": mode, "rate": level["rate_rps"], "sent_rps": loop.get("sent_rps"),
            "completed_rps": loop.get("completed_rps"), "dropped": loop.get("dropped"),
            "lag_p50_ms": lag.get("p50"), "lag_p99_ms": lag.get("p99"), "lag_max_ms": lag.get("max"),
            "late": lag.get("late"), "late_pct": 100.0 * (lag.get("late") or 0) / n if n else None,
            "cpu_pct": (level.get("client") or {}).get("cpu_pct"),
            "client_saturated": level["client_saturated"],
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="50,200,500")
    parser.add_argument("--level-duration", type=float, default=6.0)
    parser.add_argument("--modes", default="single,workers2")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    rows: list[dict] = []
    flags = ["--max-batch", "4096", "--decode-base-ms", "5", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0"]
    with tempfile.TemporaryDirectory() as tmp, MockServer(flags) as mock:
        for mode in args.modes.split(","):
            rows += run_mode(mock.base_url, mode, rates, args.level_duration, Path(tmp))
    print("send lag of open-loop (Poisson) arrivals against loadtest mock; late = sent > 10 ms after schedule")
    print(format_table(rows, [
        Column("mode", "mode", left=True), Column("rate", "offered req/s", "g"), Column("sent_rps", "sent req/s", ".1f"),
        Column("completed_rps", "done req/s", ".1f"), Column("dropped", "dropped"),
        Column("lag_p50_ms", "lag p50 ms", ".2f"), Column("lag_p99_ms", "lag p99 ms", ".2f"),
        Column("lag_max_ms", "lag max ms", ".1f"), Column("late", "late"), Column("late_pct", "late %", ".2f"),
        Column("cpu_pct", "client CPU %", ".0f"), Column("client_saturated", "saturated"),
    ]))
    if args.json:
        write_json(args.json, {"config": {"rates": rates, "level_duration_s": args.level_duration}, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
