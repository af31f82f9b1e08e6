"""Fleets: 1, 2 and 3 ``loadtest mock`` replicas behind Debian's nginx, least_conn and round robin.

Per replica count and balancing method, one ``loadtest run`` over levels around N x one
replica's capacity, reading each replica's metrics (``target.metrics.urls``; with
``--prometheus`` also a second run reading them through Debian's Prometheus), and a table of
what summary.json says: the capacity, per replica, the per-pod running threshold, and the
imbalance (busiest over mean running requests) at capacity and at the first failing level.

The mock's model (loadtest/mock/MODEL.md) makes one replica's capacity known: ITL = base +
per_seq x running, so with --decode-base-ms 10 --decode-per-seq-ms 30 and an ITL p95 SLO of
85 ms one replica holds 2 users (70 ms) and fails at 3 (100 ms). A perfect balancer gives
N x 2; round robin with mixed output lengths piles long requests on one replica now and then.

    python benchmarks/bench_fleet.py [--replicas 1,2,3] [--methods least_conn,round_robin]
                                     [--level-duration 6] [--prometheus] [--json out.json]
Bounded: each run has max 2N+2 levels of --level-duration seconds (about 1-2 minutes per run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _table import Column, format_table, write_json  # noqa: E402
from support.fleet import fleet, prometheus  # noqa: E402

FLAGS = ["--decode-base-ms", "10", "--decode-per-seq-ms", "30", "--prefill-per-token-ms", "0"]
SLO = {"ttft_ms": {}, "itl_ms": {"p95": 85}, "max_error_rate": 0.01}


def scenario(folder: Path, origin: str, metrics: dict, levels: list[int], level_s: float) -> Path:
    data = {
        "name": "fleet",
        "target": {"base_url": origin + "/v1", "model": "mock-model", "timeout_s": 30, "metrics": metrics},
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": {"mean": 24, "stddev": 16}},
        "load": {"levels": levels, "level_duration_s": level_s, "warmup_s": 1, "warmup_requests": 0,
                 "client_limits": {"loop_lag_p99_ms": 50, "reader_batch_p99_ms": 50, "cpu_pct": 100}},
        "slo": SLO,
    }
    path = folder / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(path: Path, out: Path) -> dict:
    result = subprocess.run([sys.executable, "-m", "loadtest", "run", str(path), "--out", str(out)],
                            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if result.returncode not in (0, 1):
        raise RuntimeError(result.stderr[-2000:])
    return json.loads((out / "summary.json").read_text())


def row(n: int, method: str, source: str, s: dict) -> dict:
    cap = s["capacity"]
    by_c = {lv["concurrency"]: lv for lv in s["levels"]}
    running = next((x for x in s["autoscaling"]["signals"] if x["role"] == "running"), {})
    imb_cap = s["autoscaling"].get("imbalance_at_capacity") or {}
    fail = by_c.get(cap.get("first_failing")) or {}
    return {
        "replicas": n, "method": method, "source": source, "capacity": cap["concurrency"],
        "ideal": 2 * n, "per_replica": cap.get("per_replica"), "first_failing": cap.get("first_failing"),
        "threshold": running.get("threshold"), "at_capacity_pod_p50": (running.get("at_capacity") or {}).get("p50"),
        "imbalance_cap": imb_cap.get("ratio"), "imbalance_fail": fail.get("imbalance"),
        "counted": s["target"].get("replicas"), "message": s["autoscaling"].get("fleet_message"),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--replicas", default="1,2,3")
    p.add_argument("--methods", default="least_conn,round_robin")
    p.add_argument("--level-duration", type=float, default=6.0)
    p.add_argument("--prometheus", action="store_true", help="also read the metrics through Prometheus")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    rows = []
    for n in [int(x) for x in args.replicas.split(",")]:
        for method in args.methods.split(","):
            if n == 1 and method != args.methods.split(",")[0]:
                continue  # one replica: the balancer has no choice
            levels = list(range(max(1, n // 2), 2 * n + 3))
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                with fleet(folder, n, FLAGS, method) as (origin, mocks):
                    urls = [f"{m.url}/metrics" for m in mocks]
                    s = run(scenario(folder, origin, {"urls": urls, "interval_s": 0.5}, levels, args.level_duration),
                            folder / "direct")
                    rows.append(row(n, method, "urls", s))
                    print(json.dumps(rows[-1]), flush=True)
                    if args.prometheus:
                        with prometheus(folder / "prom", [f"127.0.0.1:{m.port}" for m in mocks]) as prom:
                            metrics = {"prometheus": {"url": prom, "selector": 'job="fleet"'}, "interval_s": 0.5}
                            s = run(scenario(folder, origin, metrics, levels, args.level_duration), folder / "prom-run")
                            rows.append(row(n, method, "prometheus", s))
                            print(json.dumps(rows[-1]), flush=True)
    cols = [Column("replicas", "N"), Column("method", "balancer", left=True), Column("source", "metrics", left=True),
            Column("capacity", "capacity"), Column("ideal", "N x one"), Column("per_replica", "per replica", ".2f"),
            Column("threshold", "running thr/pod", ".2f"), Column("imbalance_cap", "imb@cap", ".2f"),
            Column("imbalance_fail", "imb@fail", ".2f")]
    print(format_table(rows, cols))
    if args.json:
        write_json(args.json, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
