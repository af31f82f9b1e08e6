"""Does scraping the server's /metrics show in the client's self-check?

The scraper is a child process of ``loadtest run`` precisely so that it does
not: it shares neither the load process's GIL nor its event loop. This
benchmark checks that claim. The same load (N streams at 100 tokens/s each
against ``loadtest mock``) runs twice per stream count, with scraping off
and on; "on" scrapes a page the size of a busy vLLM's (``--lines`` samples,
mostly histogram buckets, served by a small HTTP server in this process)
every ``--interval`` seconds (default 0.2 s: five times the default rate, to
exaggerate). The table puts each level's self-check figures side by side.
Differences within run-to-run noise (about ±0.5 ms on the shared 2-core
development machine) mean the scraper's cost does not show.

    python benchmarks/bench_scrape_overhead.py [--streams 50,100] [--level-duration 8] [--lines 2000]
                                               [--interval 0.2] [--repeat 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from _table import Column, format_table, write_json
from loadtest.mock.process import MockServer
from loadtest.records import read_run_json

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.metrics_page import serve_metrics_page  # noqa: E402


def metrics_page(lines: int) -> bytes:
    """A vLLM-like exposition: a few gauges, then histogram buckets up to ``lines`` samples."""
    out = [
        "# TYPE vllm:num_requests_running gauge", 'vllm:num_requests_running{model_name="m"} 3.0',
        "# TYPE vllm:num_requests_waiting gauge", 'vllm:num_requests_waiting{model_name="m"} 0.0',
        "# TYPE vllm:kv_cache_usage_perc gauge", 'vllm:kv_cache_usage_perc{model_name="m"} 0.25',
    ]
    n = 0
    while n < lines:
        name = f"vllm:hist_{n // 40}_seconds"
        out.append(f"# TYPE {name} histogram")
        for i in range(38):
            out.append(f'{name}_bucket{{le="{0.001 * 2 ** (i % 20)}",model_name="m"}} {i * 7}.0')
        out += [f'{name}_bucket{{le="+Inf",model_name="m"}} 300.0', f'{name}_sum{{model_name="m"}} 12.5', f'{name}_count{{model_name="m"}} 300.0']
        n += 40
    return ("\n".join(out) + "\n").encode()


def run_once(base_url: str, metrics: dict | bool, streams: list[int], level_s: float, work: Path, name: str) -> list[dict]:
    scenario = {
        "name": name,
        "target": {"base_url": base_url, "model": "mock-model", "timeout_s": 30, "metrics": metrics},
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 100},
        "load": {"levels": streams, "level_duration_s": level_s, "warmup_s": 2, "warmup_requests": 0},
        "slo": {},
    }
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = work / name
    subprocess.run([sys.executable, "-m", "loadtest", "run", str(path), "--out", str(out)],
                   check=True, capture_output=True, timeout=60 + 3 * level_s * len(streams))
    rows = []
    for level in read_run_json(out)["levels"]:
        client = level.get("client") or {}
        rows.append({
            "streams": level["concurrency"], "scraping": name.split("-")[0],
            "loop_lag_p99_ms": client.get("loop_lag_p99_ms"), "reader_batch_p99_ms": client.get("reader_batch_p99_ms"),
            "cpu_pct": client.get("cpu_pct"), "saturated": bool(client.get("saturated")),
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="50,100")
    parser.add_argument("--level-duration", type=float, default=8.0)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=2, help="off/on pairs, alternating")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    streams = [int(s) for s in args.streams.split(",")]
    page = metrics_page(args.lines)
    server = serve_metrics_page(page)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, MockServer(["--decode-base-ms", "10", "--decode-per-seq-ms", "0",
                                                           "--prefill-per-token-ms", "0"]) as mock:
        work = Path(tmp)
        for i in range(args.repeat):
            rows += run_once(mock.base_url, False, streams, args.level_duration, work, f"off-{i}")
            rows += run_once(mock.base_url, {"url": url, "interval_s": args.interval}, streams, args.level_duration, work, f"on-{i}")
    server.shutdown()
    rows.sort(key=lambda r: (r["streams"], r["scraping"]))
    n_lines = page.count(b"\n")
    print(f"scraping a {len(page) / 1024:.0f} KiB page of {n_lines} lines every {args.interval:g} s, "
          f"in a child process; {args.repeat} runs each, alternating off/on")
    print(format_table(rows, [
        Column("streams", "streams"), Column("scraping", "scraping", left=True),
        Column("loop_lag_p99_ms", "loop lag p99 ms", ".2f"), Column("reader_batch_p99_ms", "reader batch p99 ms", ".2f"),
        Column("cpu_pct", "client CPU %", ".0f"), Column("saturated", "flagged"),
    ]))
    if args.json:
        write_json(args.json, {"rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
