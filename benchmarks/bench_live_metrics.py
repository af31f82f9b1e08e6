"""What ``--metrics-port`` adds to the sink's thread, as a ratio to the part-file write it already does.

The live metrics are bucketed and rendered in the sink's native thread, once per batch
(loadtest/export/serve.py); a scrape on the event loop returns cached bytes. This times,
in one process and one run, for batches of REQUESTS requests of CHUNKS chunks each:
the part-file write of the batch (what the sink does today) and the bucketing plus
rendering of the same batch, and prints their ratio. Bounded: REPEATS batches each.

    python benchmarks/bench_live_metrics.py [--requests 1000] [--chunks 100] [--repeats 10] [--json F]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from _table import Column, format_table, write_json
from loadtest.export.live import LiveMetrics
from loadtest.export.serve import ScrapeText
from loadtest.records import RequestWriter, records_to_table


def batch(requests: int, chunks: int, levels: int = 1, classes: int = 2):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(requests):
        times = list(20.0 + np.cumsum(rng.exponential(10.0, chunks)))
        rows.append({"request_id": str(i), "worker": "w", "user": i, "level": 8 * (1 + i % levels), "level_index": 0,
                     "warmup": False, "start_wall": 0.0, "ttft_ms": times[0], "e2e_ms": times[-1] + 1, "chunk_ms": times,
                     "chunk_tokens": [1] * chunks, "ok": True, "class": f"c{i % classes}"})
    return records_to_table(rows)


def measure(requests: int, chunks: int, repeats: int) -> dict:
    table = batch(requests, chunks)
    writer = RequestWriter(Path(tempfile.mkdtemp(prefix="bench-live-")))
    metrics = LiveMetrics("bench")
    text = ScrapeText(metrics)
    metrics.observe(table)
    text.refresh()  # imports and first render out of the timing
    t0 = time.perf_counter()
    for _ in range(repeats):
        writer.write(table)
    write_s = (time.perf_counter() - t0) / repeats
    t0 = time.perf_counter()
    for _ in range(repeats):
        metrics.observe(table)
        text.refresh()
    live_s = (time.perf_counter() - t0) / repeats
    t0 = time.perf_counter()
    for _ in range(1000):
        text.current()
    serve_s = (time.perf_counter() - t0) / 1000
    return {"requests": requests, "chunks": chunks, "gaps": requests * (chunks - 1), "part_write_ms": write_s * 1e3,
            "live_ms": live_s * 1e3, "ratio": live_s / write_s, "scrape_on_loop_us": serve_s * 1e6,
            "text_bytes": len(text.current())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--chunks", type=int, default=100)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    rows = [measure(n, args.chunks, args.repeats) for n in (args.requests // 10, args.requests)]
    print(format_table(rows, [Column("requests", "requests"), Column("gaps", "ITL gaps"),
                              Column("part_write_ms", "part write ms", ".1f"), Column("live_ms", "bucket+render ms", ".1f"),
                              Column("ratio", "ratio", ".2f"), Column("scrape_on_loop_us", "scrape on loop µs", ".2f")]))
    if args.json:
        write_json(args.json, {"rows": rows})


if __name__ == "__main__":
    main()
