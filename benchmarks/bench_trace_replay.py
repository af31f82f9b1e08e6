"""Trace replay fidelity and capacity: a synthetic Mooncake trace at 1×, 2×, 4×, and the speedup found against the mock's truth.

Part 1, schedule fidelity. ``loadtest trace synth`` writes a Mooncake trace
(``--rate`` req/s with shared prefixes); ``loadtest run`` replays it at each
``--speedups`` level against ``loadtest mock`` (wide and fast enough never to be
the bottleneck) with ``--request-log``. Per level: the server-side lag of each
arrival from its trace time / speedup (the mock's own arrival stamp, same host
clock), p50 and p99 over the measured window, beside the client's own send lag.

Part 2, capacity. A mock that completes at most λ* = slots / (tokens × step)
requests/s (``--max-batch 4``, ``--decode-base-ms 30``, 16-token replies: 8.33
req/s) and a BurstGPT trace of known mean rate (``--capacity-rate``); ``--refine``
bisects the speedup. The truth is λ* / mean rate.

    python benchmarks/bench_trace_replay.py [--rate 100] [--speedups 1,2,4] [--level-duration 6] [--workers N]
        [--capacity-rate 3] [--skip-capacity] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import yaml

from _table import Column, format_table, write_json
from loadtest.load.trace_replay import replay_offsets
from loadtest.mock.process import MockServer
from loadtest.records import read_requests
from loadtest.workload.trace import read_trace

BLOCK = 64


def loadtest(*args: str, timeout: float = 600) -> None:
    subprocess.run([sys.executable, "-m", "loadtest", *args], check=True, capture_output=True, timeout=timeout)


def scenario(path: Path, base_url: str, trace: Path, fmt: str, load: dict, slo: dict, block: int = BLOCK,
             metrics: bool | dict = False) -> Path:
    path.write_text(yaml.safe_dump({
        "name": path.stem,
        "target": {"base_url": base_url, "model": "mock-model", "timeout_s": 30, "metrics": metrics},
        "workload": {"trace": {"path": str(trace), "format": fmt, "block_tokens": block}},
        "load": {"warmup_s": 1, "warmup_requests": 0, **load},
        "slo": slo,
    }))
    return path


def fidelity(work: Path, rate: float, speedups: list[float], level_s: float, workers: int = 0) -> list[dict]:
    trace_path = work / "fidelity.jsonl"
    loadtest("trace", "synth", str(trace_path), "--rate", str(rate), "--duration-s", "30", "--input-mean", "256",
             "--input-stddev", "64", "--output-mean", "8", "--prefix-groups", "8", "--prefix-blocks", "2",
             "--prefix-share", "0.7", "--block-tokens", str(BLOCK), "--seed", "1")
    trace = read_trace(str(trace_path), "mooncake", block_tokens=BLOCK)
    log = work / "requests.jsonl"
    flags = ["--max-batch", "4096", "--decode-base-ms", "5", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0",
             "--request-log", str(log), "--prefix-cache-blocks", "1000000", "--prefix-cache-block-tokens", str(BLOCK)]
    out = work / "fidelity"
    with MockServer(flags) as mock:
        path = scenario(work / "fidelity.yaml", mock.base_url, trace_path, "mooncake",
                        {"speedups": speedups, "max_in_flight": 512, "level_duration_s": level_s,
                         "min_level_duration_s": level_s, "max_level_duration_s": level_s},
                        {"max_error_rate": 1.0}, metrics={"interval_s": 0.5})
        loadtest("run", str(path), "--out", str(out), *(["--workers", str(workers)] if workers else []))
    summary = json.loads((out / "summary.json").read_text())
    frame = read_requests(out)
    offset = time.time() - time.perf_counter()
    logged = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    rows = []
    for lv in summary["levels"]:
        mine = frame[frame.level_index == lv["index"]].sort_values("scheduled_wall")
        start = lv["window"]["start_wall"]
        schedule = np.array(replay_offsets(trace, lv["speedup"], 3600.0, 0)[0])
        scheduled = mine.scheduled_wall.to_numpy() - start
        # every record's due time is one of the trace's (over the speedup), and no arrival is sent twice
        nearest = np.clip(np.searchsorted(schedule, scheduled), 1, len(schedule) - 1)
        nearest = np.where(np.abs(schedule[nearest - 1] - scheduled) < np.abs(schedule[nearest] - scheduled), nearest - 1, nearest)
        sent = Counter(np.rint(scheduled * 1e6).astype(int))  # rows due at the same time: a multiset
        due = Counter(np.rint(schedule[: int(nearest.max()) + 1] * 1e6).astype(int))
        exact = bool(np.all(np.abs(schedule[nearest] - scheduled) < 1e-6) and not sent - due
                     and sum((due - sent).values()) <= 2)
        # the server's lag: its arrival stamps against the records' due times, both in time order
        expected = np.sort(scheduled[(mine.error_kind != "dropped").to_numpy()])  # a dropped arrival never reached it
        # the level's own requests (each prompt's first word names its salt scope, level and repetition)
        tag = f".L{lv['index']}.R"
        seen = np.sort([x["arrival"] + offset for x in logged if tag in x["prompt"].split(" ", 1)[0]])[: len(expected)]
        expected = expected[: len(seen)]
        lag = (seen - (start + expected)) * 1000.0
        measured = expected >= 1.0  # after warmup_s
        client = lv["open_loop"]["schedule_lag_ms"]
        rows.append({
            "speedup": lv["speedup"], "rate": lv["rate_rps"], "arrivals": int(measured.sum()),
            "sent_rps": lv["open_loop"]["sent_rps"], "dropped": lv["open_loop"]["dropped"],
            "schedule_exact": exact,
            "server_lag_p50_ms": float(np.median(lag[measured])), "server_lag_p99_ms": float(np.percentile(lag[measured], 99)),
            "client_lag_p99_ms": client["p99"], "client_saturated": lv["client_saturated"],
            "host_contended": lv["host_contended"],
            "prefix_hit_rate": (lv.get("prefix_cache") or {}).get("hit_rate"),
            "prefix_source": (lv.get("prefix_cache") or {}).get("source"),
        })
    return rows


def capacity(work: Path, trace_rate: float) -> dict:
    trace_path = work / "capacity.csv"
    loadtest("trace", "synth", str(trace_path), "--format", "burstgpt", "--rate", str(trace_rate), "--duration-s", "120",
             "--burstiness", "50", "--input-mean", "32", "--output-mean", "16", "--seed", "2")
    mean = read_trace(str(trace_path), "burstgpt").mean_rate_rps
    truth_rps = 4 / (16 * 0.030)
    out = work / "capacity"
    flags = ["--max-batch", "4", "--decode-base-ms", "30", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0"]
    with MockServer(flags) as mock:
        path = scenario(work / "capacity.yaml", mock.base_url, trace_path, "burstgpt",
                        {"speedups": [1, 2, 4], "max_in_flight": 256, "level_duration_s": 5, "max_level_duration_s": 10},
                        {"ttft_ms": {"p95": 250}, "itl_ms": {}, "max_error_rate": 0.01}, block=512)
        loadtest("run", str(path), "--out", str(out), "--refine")
    cap = json.loads((out / "summary.json").read_text())["capacity"]
    return {"trace_mean_rps": mean, "mock_throughput_rps": truth_rps, "truth_speedup": truth_rps / mean,
            "found_speedup": cap["speedup"], "first_failing_speedup": cap["first_failing_speedup"],
            "verdict": cap["verdict"], "message": cap["message"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=100.0, help="the fidelity trace's mean rate (req/s at 1x)")
    parser.add_argument("--speedups", default="1,2,4")
    parser.add_argument("--level-duration", type=float, default=6.0)
    parser.add_argument("--capacity-rate", type=float, default=3.0)
    parser.add_argument("--skip-capacity", action="store_true")
    parser.add_argument("--workers", type=int, default=0, help="local worker processes for the fidelity run (0: one process)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    speedups = [float(s) for s in args.speedups.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        rows = fidelity(Path(tmp), args.rate, speedups, args.level_duration, args.workers)
        cap = None if args.skip_capacity else capacity(Path(tmp), args.capacity_rate)
    how = f"--workers {args.workers}" if args.workers else "one process"
    print(f"trace replay schedule fidelity ({how}): synthetic mooncake trace at {args.rate:g} req/s (1x) against loadtest mock")
    print(format_table(rows, [
        Column("speedup", "speedup", "g"), Column("rate", "req/s", ".1f"), Column("arrivals", "arrivals"),
        Column("sent_rps", "sent req/s", ".1f"), Column("dropped", "dropped"), Column("schedule_exact", "schedule = trace/s"),
        Column("server_lag_p50_ms", "server lag p50 ms", ".2f"), Column("server_lag_p99_ms", "server lag p99 ms", ".2f"),
        Column("client_lag_p99_ms", "client lag p99 ms", ".2f"), Column("client_saturated", "saturated"),
        Column("host_contended", "host busy"), Column("prefix_hit_rate", "prefix hit", ".3f"),
        Column("prefix_source", "hit source", left=True),
    ]))
    if cap:
        print(f"capacity: found {cap['found_speedup']}x (first failing {cap['first_failing_speedup']}x); truth "
              f"{cap['mock_throughput_rps']:.2f} / {cap['trace_mean_rps']:.3f} = {cap['truth_speedup']:.3f}x; {cap['message']}")
    if args.json:
        write_json(args.json, {"config": vars(args) | {"json": str(args.json)}, "fidelity": rows, "capacity": cap})
    return 0


if __name__ == "__main__":
    sys.exit(main())
