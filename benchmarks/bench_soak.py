"""Soak: one long level at 100 streams; the client's memory stays flat and its folder grows linearly.

A load tester that leaks is one that cannot run the nightly hour-long soak a
platform team wants before a launch. This runs ``loadtest run`` with a single
fixed-length level (default 30 minutes) against the mock and samples, every
``--every`` seconds:

* the RSS of the ``loadtest run`` process itself (the users, the reader, the
  recorder), and of its child processes together (the level judge, the
  server-metrics scraper);
* the size of the run folder (records are flushed as Parquet part files).

It reports the RSS at the start of the level, after its first minute and at
its end, the largest RSS after the first minute relative to the one-minute
figure (target: within +10%), and how linear the folder's growth is (bytes per
minute in the second half over the first half; 1.0 is linear).

    python benchmarks/bench_soak.py [--minutes 30] [--streams 100] [--every 10] [--json PATH] [--probe JSONL]

``--probe`` runs the client under ``_memprobe.py``, which says where growth
lives: malloc's bytes in use against its free arena bytes (fragmentation),
Arrow's pool, and live Python objects by type (a Python-level leak).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import yaml
from _table import Column, format_table, write_json

from loadtest.mock.process import MockServer

#: 25 ms steps, 4 tokens per chunk, 64 tokens a request: 100 streams make 1,000
#: chunks/s and ~60 requests/s, a steady, ordinary load for one process.
ENGINE = ["--decode-base-ms", "25", "--decode-per-seq-ms", "0", "--prefill-per-token-ms", "0",
          "--tokens-per-chunk", "4"]
RSS_GROWTH_LIMIT = 0.10


def write_scenario(folder: Path, base_url: str, streams: int, seconds: float) -> Path:
    data = {
        "name": "soak",
        "target": {"base_url": base_url, "model": "mock-model", "api": "chat", "timeout_s": 30},
        "workload": {"prompt_tokens": {"mean": 64, "stddev": 16}, "max_tokens": 64},
        "load": {"levels": [streams], "level_duration_s": seconds, "min_level_duration_s": seconds,
                 "max_level_duration_s": seconds, "warmup_s": 10, "warmup_requests": 0},
        "slo": {"ttft_ms": {"p95": 2000}, "itl_ms": {"p95": 500}, "max_error_rate": 0.01},
    }
    path = folder / "soak.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def rss_mb(proc: psutil.Process) -> tuple[float, float]:
    """(the process's RSS, its children's RSS together), in MB; 0 for what has gone."""
    try:
        own = proc.memory_info().rss
        children = 0
        for child in proc.children(recursive=True):
            try:
                children += child.memory_info().rss
            except psutil.NoSuchProcess:
                pass
    except psutil.NoSuchProcess:
        return 0.0, 0.0
    return own / 1e6, children / 1e6


def sample_run(proc: subprocess.Popen, out: Path, seconds: float, every: float) -> list[dict[str, Any]]:
    """Samples from the first flushed records (the level is on) to the level's end, bounded in time."""
    watched = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list((out / "requests.parts").glob("*.parquet")):
        if proc.poll() is not None:
            return []
        time.sleep(0.2)
    start = time.monotonic()
    samples = []
    while proc.poll() is None and (t := time.monotonic() - start) <= seconds:
        own, children = rss_mb(watched)
        samples.append({"t_s": round(t, 1), "rss_mb": round(own, 1), "children_rss_mb": round(children, 1),
                        "folder_mb": round(folder_bytes(out) / 1e6, 2)})
        time.sleep(every)
    return samples


def figures(samples: list[dict[str, Any]], settle_s: float = 60.0) -> dict[str, Any]:
    """Start / settled (1 min) / end RSS, the worst growth after settling, and the folder's linearity."""
    after = [s for s in samples if s["t_s"] >= settle_s]
    if len(after) < 3:
        return {"measured": False}
    at_1min, end = after[0], after[-1]
    worst = max(s["rss_mb"] for s in after)
    mid_t = (at_1min["t_s"] + end["t_s"]) / 2
    mid = min(after, key=lambda s: abs(s["t_s"] - mid_t))
    rate = lambda a, b: (b["folder_mb"] - a["folder_mb"]) / max(b["t_s"] - a["t_s"], 1e-9) * 60  # noqa: E731
    first_half, second_half = rate(at_1min, mid), rate(mid, end)
    return {
        "measured": True,
        "settle_s": settle_s,
        "minutes": round(end["t_s"] / 60, 1),
        "rss_start_mb": samples[0]["rss_mb"],
        "rss_1min_mb": at_1min["rss_mb"],
        "rss_end_mb": end["rss_mb"],
        "rss_max_after_1min_mb": worst,
        "rss_growth_after_1min": round(worst / at_1min["rss_mb"] - 1, 4),
        "children_rss_1min_mb": at_1min["children_rss_mb"],
        "children_rss_end_mb": end["children_rss_mb"],
        "folder_end_mb": end["folder_mb"],
        "folder_mb_per_min_first_half": round(first_half, 3),
        "folder_mb_per_min_second_half": round(second_half, 3),
        "folder_linearity": round(second_half / first_half, 3) if first_half > 0 else None,
        "rss_flat": worst / at_1min["rss_mb"] - 1 <= RSS_GROWTH_LIMIT,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="growth is measured from this far into the level (default: the first minute)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--probe", default=None, metavar="JSONL",
                        help="run the client under benchmarks/_memprobe.py and write its memory breakdown "
                             "(malloc in use vs free in arenas, Arrow's pool, live Python objects by type) here")
    parser.add_argument("--probe-every", type=float, default=60.0, help="seconds between probe samples")
    args = parser.parse_args(argv)
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp, MockServer(ENGINE) as mock:
        folder = Path(tmp)
        scenario = write_scenario(folder, mock.base_url, args.streams, seconds)
        out = folder / "run"
        launcher = ["-m", "loadtest"]
        env = dict(os.environ)
        if args.probe:
            launcher = [str(Path(__file__).with_name("_memprobe.py"))]
            env.update(MEMPROBE_PATH=str(Path(args.probe).resolve()), MEMPROBE_EVERY_S=str(args.probe_every))
        proc = subprocess.Popen(
            [sys.executable, *launcher, "run", str(scenario), "--out", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env,
        )
        try:
            samples = sample_run(proc, out, seconds, args.every)
            _, stderr = proc.communicate(timeout=seconds + 600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        requests = _requests(out)
    result = {**figures(samples, args.settle), "streams": args.streams, "requests": requests, "exit_code": proc.returncode}
    shown = [s for i, s in enumerate(samples)
             if s["t_s"] < args.settle + args.every or i % max(1, int(60 / args.every)) == 0 or s is samples[-1]]
    print(format_table(shown, [Column("t_s", "t (s)", ".0f"), Column("rss_mb", "RSS MB", ".1f"),
                               Column("children_rss_mb", "children MB", ".1f"), Column("folder_mb", "folder MB", ".2f")]))
    print()
    print(format_table([result], [Column(k, k) for k in result if k != "measured"]))
    if proc.returncode != 0:
        print(f"loadtest run exited {proc.returncode}: {stderr.strip()[-500:]}")
    if args.json:
        write_json(args.json, {"samples": samples, "result": result})
    return 0  # the judgement is in the result ("rss_flat") and in run_all.py


def _requests(out: Path) -> int | None:
    from loadtest.records import read_requests

    try:
        return len(read_requests(out))
    except Exception:  # noqa: BLE001 - a figure, not the verdict
        return None


if __name__ == "__main__":
    sys.exit(main())
