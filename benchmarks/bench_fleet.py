"""Fleets: 1, 2 and 3 ``loadtest mock`` replicas behind Debian's nginx, least_conn and round robin.

Per replica count and balancing method, one ``loadtest run`` over levels around N x one
replica's capacity, reading each replica's metrics (``target.metrics.urls``; with
``--prometheus`` also a second run reading them through Debian's Prometheus), and a table of
what summary.json says: the capacity, per replica, the per-pod running threshold, and the
imbalance (busiest over mean running requests) at capacity and at the first failing level.

The mock's model (loadtest/mock/MODEL.md) makes one replica's capacity known, two ways:

* ``--model batch`` (default; immune to a busy host): ``--max-batch 2 --rate-limit-queue 0``,
  a replica refuses (429) a request beyond 2 at once, and the SLO is a 5% error budget: one
  replica holds 2 users and fails at 3;
* ``--model latency``: ITL = 10 + 50 x running ms, ITL p95 SLO 133 ms: one replica holds 2
  users (110 ms) and fails at 3 (160 ms), each 20% from the limit (a loaded host moves it).

A perfect balancer gives N x 2; round robin with mixed output lengths (mean 48, sd 40 tokens)
puts requests on a busy replica now and then while another has room.

    python benchmarks/bench_fleet.py [--replicas 1,2,3] [--methods least_conn,round_robin]
                                     [--model batch|latency] [--level-duration 4] [--prometheus]
                                     [--json out.json]
Bounded: each run has at most 2N+2 levels of at most 3 x --level-duration seconds.
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

MODELS = {
    "batch": (["--max-batch", "2", "--rate-limit-queue", "0", "--retry-after-s", "0"],
              {"itl_ms": {"p95": 1000}, "max_error_rate": 0.05}),
    "latency": (["--decode-base-ms", "10", "--decode-per-seq-ms", "50", "--prefill-per-token-ms", "0"],
                {"itl_ms": {"p95": 133}, "max_error_rate": 0.01}),
}


def scenario(folder: Path, origin: str, metrics: dict, levels: list[int], level_s: float, slo: dict) -> Path:
    data = {
        "name": "fleet",
        "target": {"base_url": origin + "/v1", "model": "mock-model", "timeout_s": 30, "metrics": metrics},
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": {"mean": 48, "stddev": 40}},
        "load": {"levels": levels, "level_duration_s": level_s, "min_level_duration_s": level_s,
                 "max_level_duration_s": 3 * level_s, "warmup_s": 1, "warmup_requests": 0,
                 "client_limits": {"loop_lag_p99_ms": 50, "reader_batch_p99_ms": 50, "cpu_pct": 100}},
        "slo": slo,
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
        "counted": s["target"].get("replicas"), "verdict": cap.get("verdict"),
        "message": s["autoscaling"].get("fleet_message"),
        "server_warnings": [w for w in s["warnings"] if w.startswith("server metrics")],
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--replicas", default="1,2,3")
    p.add_argument("--methods", default="least_conn,round_robin")
    p.add_argument("--level-duration", type=float, default=4.0)
    p.add_argument("--model", choices=sorted(MODELS), default="batch")
    p.add_argument("--prometheus", action="store_true", help="also read the metrics through Prometheus")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    flags, slo = MODELS[args.model]
    rows = []
    for n in [int(x) for x in args.replicas.split(",")]:
        for method in args.methods.split(","):
            if n == 1 and method != args.methods.split(",")[0]:
                continue  # one replica: the balancer has no choice
            levels = list(range(max(1, n // 2), 2 * n + 3))
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp)
                with fleet(folder, n, flags, method) as (origin, mocks):
                    urls = [f"{m.url}/metrics" for m in mocks]
                    metrics = {"urls": urls, "interval_s": 0.25}
                    s = run(scenario(folder, origin, metrics, levels, args.level_duration, slo), folder / "direct")
                    rows.append(row(n, method, "urls", s))
                    print(json.dumps(rows[-1]), flush=True)
                    if args.prometheus:
                        with prometheus(folder / "prom", [f"127.0.0.1:{m.port}" for m in mocks], 0.25) as prom:
                            metrics = {"prometheus": {"url": prom, "selector": 'job="fleet"'}, "interval_s": 0.25}
                            s = run(scenario(folder, origin, metrics, levels, args.level_duration, slo),
                                    folder / "prom-run")
                            rows.append(row(n, method, "prometheus", s))
                            print(json.dumps(rows[-1]), flush=True)
    cols = [Column("replicas", "N"), Column("method", "balancer", left=True), Column("source", "metrics", left=True),
            Column("capacity", "capacity"), Column("ideal", "N x one"), Column("per_replica", "per replica", ".2f"),
            Column("threshold", "running thr/pod", ".2f"), Column("imbalance_cap", "imb@cap", ".2f"),
            Column("imbalance_fail", "imb@fail", ".2f"), Column("verdict", "verdict", left=True)]
    print(format_table(rows, cols))
    if args.json:
        write_json(args.json, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
