"""How exactly the harness times chunks, against a mock whose send times are known.

The mock runs with ``--decode-per-seq-ms 0`` (and no prefill cost), so every
stream gets a chunk every 10 ms whatever the concurrency, and with
``--stamp-chunks`` every chunk carries the mock's own send time on the same
clock as the client's. So each inter-chunk gap measured by the client can be
compared with the gap the server actually produced:

    error = client gap − server gap        (per gap, within one request)
    lag   = client arrival − server send   (per chunk)

Each level counts the gaps the analyzer counts for it: those whose chunk
arrived inside the level's measured window, as its verdict would use them.

The load comes from the real ``loadtest run`` command (one process, then
``--workers 2``), one level per stream count, so the figures include
everything a user's run includes. Next to them, each level's self-check from
run.json: its stamp-delay distribution and the error bound it gives a p99 ITL
check (analysis/client_error.py). The point is to check that the bound covers
the real error: a level whose bound is under 5 ms while its p99 |error| is
above 5 ms would let a verdict flip unflagged, a calibration failure called
out loudly. (bench_selfcheck.py turns this into a confusion matrix.)

    python benchmarks/bench_fidelity.py [--streams 1,50,100,200,400] [--level-duration 10] [--warmup 2]
                                        [--modes single,workers2] [--json PATH] [--keep DIR]
                                        [--https [--tls-reads reactor,greenlets]]

With ``--https`` the TLS streams are read by the reactor thread (the default)
or, for ``greenlets``, by each user's greenlet (``LOADTEST_TLS_READS``); both
in one invocation gives the before/after of that change side by side, its
rows labelled ``<mode>`` and ``<mode>/greenlets``.

Each request lasts about 1 s (100 tokens at 10 ms), so a level should last at
least 3 s for a whole round of requests to start after its warmup and end
before it does. The default run takes about 2 minutes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from _table import Column, format_table, write_json
from loadtest.analysis.windows import level_windows, locate
from loadtest.mock.process import MockServer
from loadtest.mock.tls import self_signed_cert
from loadtest.records import read_requests, read_run_json

#: 100 tokens/s per stream whatever the concurrency; stamped chunks give the truth.
DECODE_MS = 10.0
MAX_TOKENS = 100
#: A level the self-check passed must have p99 |error| at or below this.
CALIBRATION_LIMIT_MS = 5.0
#: ``--modes`` names → extra ``loadtest run`` arguments.
MODES: dict[str, list[str]] = {"single": [], "workers2": ["--workers", "2"]}
#: ``--tls-reads`` names → the environment of ``loadtest run`` (loadtest/client/tls_read.py).
TLS_READS: dict[str, dict[str, str]] = {"reactor": {}, "greenlets": {"LOADTEST_TLS_READS": "greenlets"}}


@dataclass(frozen=True)
class Config:
    streams: list[int]
    level_duration_s: float
    warmup_s: float
    modes: list[str]
    tokens_per_chunk: int = 1
    #: Serve HTTPS.
    https: bool = False
    #: Who reads the TLS streams, one run each (with ``https``): see TLS_READS.
    tls_reads: tuple[str, ...] = ("reactor",)


# -- running the load ------------------------------------------------------------------------


def mock_argv(max_streams: int, tokens_per_chunk: int = 1, tls: tuple[Path, Path] | None = None) -> list[str]:
    """Mock flags: constant 10 ms steps, no prefill, stamped chunks, never a queue.

    ``--max-batch`` is raised to the largest stream count: past it requests
    would queue (TTFT jumps) and the level would not be the load it claims.
    """
    argv = [
        "--decode-base-ms", str(DECODE_MS),
        "--decode-per-seq-ms", "0",
        "--prefill-per-token-ms", "0",
        "--max-batch", str(max(256, max_streams)),
        "--tokens-per-chunk", str(tokens_per_chunk),
        "--stamp-chunks",
    ]
    if tls is not None:
        argv += ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]
    return argv


def write_scenario(folder: Path, base_url: str, cfg: Config) -> Path:
    """A scenario with short prompts, 100-token answers and SLOs that never interfere."""
    data = {
        "name": "bench-fidelity",
        "target": {"base_url": base_url, "model": "mock-model", "api": "chat", "timeout_s": 60,
                   "verify_tls": False},
        "workload": {"prompt_tokens": {"mean": 8, "stddev": 0}, "max_tokens": MAX_TOKENS},
        "load": {
            "levels": cfg.streams,
            "level_duration_s": cfg.level_duration_s,
            # every level runs exactly its duration: this measures timing, not verdicts
            "min_level_duration_s": cfg.level_duration_s,
            "max_level_duration_s": cfg.level_duration_s,
            "warmup_s": cfg.warmup_s,
            "warmup_requests": 0,
        },
        "slo": {"ttft_ms": {"p95": 10_000}, "itl_ms": {"p95": 1_000}, "max_error_rate": 0.5},
    }
    path = folder / "bench-fidelity.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_mode(mode: str, cfg: Config, work: Path, tls_reads: str = "reactor") -> Path:
    """One ``loadtest run`` over all stream counts against a fresh mock; returns the run folder."""
    label = mode if tls_reads == "reactor" else f"{mode}-{tls_reads}"
    run_dir = work / label
    log = work / f"{label}.log"
    tls = self_signed_cert(work) if cfg.https else None
    with MockServer(mock_argv(max(cfg.streams), cfg.tokens_per_chunk, tls)) as mock:
        scenario = write_scenario(work, mock.base_url, cfg)
        cmd = [
            sys.executable, "-m", "loadtest", "run", str(scenario), "--out", str(run_dir),
            "--levels", ",".join(map(str, cfg.streams)),
            "--level-duration", str(cfg.level_duration_s),
            *MODES[mode],
        ]
        # Generous bound: the levels, plus start-up, worker spawn and the final analysis.
        timeout = len(cfg.streams) * cfg.level_duration_s + 120
        with open(log, "w") as out:
            env = {**os.environ, **TLS_READS[tls_reads]}
            result = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    timeout=timeout, env=env)
    if result.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise RuntimeError(f"loadtest run ({mode}) exited with {result.returncode}; its output ends with:\n{tail}")
    return run_dir


# -- measuring -------------------------------------------------------------------------------


def stamped_chunks(records: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Client and server times of every chunk, flattened, each chunk's request number and wall arrival.

    Only records where every content chunk carries a server stamp are used, so
    the two lists line up one to one.
    """
    client = [np.asarray(c, dtype=float) for c in records["chunk_ms"]]
    server = [np.asarray(s if s is not None else [], dtype=float) for s in records["chunk_sent_ms"]]
    starts = records["start_wall"].to_numpy(dtype=float)
    keep = [i for i, (c, s) in enumerate(zip(client, server)) if len(c) and len(c) == len(s)]
    if not keep:
        empty = np.empty(0)
        return empty, empty, np.empty(0, dtype=int), empty
    lengths = np.array([len(client[i]) for i in keep])
    owner = np.repeat(np.arange(len(keep)), lengths)
    client_ms = np.concatenate([client[i] for i in keep])
    arrival_wall = np.repeat(starts[keep], lengths) + client_ms / 1000.0
    return client_ms, np.concatenate([server[i] for i in keep]), owner, arrival_wall


def pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def gap_stats(
    client_ms: np.ndarray, server_ms: np.ndarray, owner: np.ndarray, counted: np.ndarray | None = None
) -> dict[str, float]:
    """Measured and true ITL, per-gap error and per-chunk lag (gaps never cross requests).

    ``counted`` marks the chunks the analysis counts (those that arrived in the
    level's measured window); a gap counts when the chunk that ends it does.
    """
    counted = np.ones(len(client_ms), dtype=bool) if counted is None else counted
    same = (owner[1:] == owner[:-1]) & counted[1:]
    client_gap = np.diff(client_ms)[same]
    server_gap = np.diff(server_ms)[same]
    error = np.abs(client_gap - server_gap)
    lag = (client_ms - server_ms)[counted]
    return {
        "chunks": int(len(client_ms)),
        "gaps": int(len(client_gap)),
        "itl_p50_ms": pct(client_gap, 50),
        "itl_p99_ms": pct(client_gap, 99),
        "true_itl_p50_ms": pct(server_gap, 50),
        "true_itl_p99_ms": pct(server_gap, 99),
        "err_p50_ms": pct(error, 50),
        "err_p99_ms": pct(error, 99),
        "err_max_ms": float(error.max()) if len(error) else float("nan"),
        "lag_p50_ms": pct(lag, 50),
        "lag_p99_ms": pct(lag, 99),
    }


def self_check(level: dict[str, Any]) -> dict[str, Any]:
    """The level's client health from run.json, as the benchmark reports it."""
    client = level.get("client") or {}
    return {
        "cpu_pct": client.get("cpu_pct"),
        "stamp_delay_p99_ms": client.get("stamp_delay_p99_ms"),
        "stamp_delay_ms": client.get("stamp_delay_ms"),
        "send_delay_ms": client.get("send_delay_ms"),
        "itl_error_bound_ms": client.get("itl_error_bound_ms"),
        "loop_lag_p99_ms": client.get("loop_lag_p99_ms"),
        "reader_batch_p99_ms": client.get("reader_batch_p99_ms"),
        "reader_lag_p99_ms": client.get("reader_lag_p99_ms"),
        "saturated": bool(client.get("saturated")),
        "reason": client.get("reason"),
    }


def p99_bound(row: dict[str, Any]) -> float:
    """The self-check's error bound for a p99 ITL check at this level (ms)."""
    from loadtest.analysis.client_error import delay_for_percentile

    table = row.get("stamp_delay_ms")
    return delay_for_percentile(table, 0.99) if table else float("nan")


def flagged(row: dict[str, Any]) -> bool:
    """Would the self-check call a verdict 5 ms from its limit unjudgeable (or was the CPU over)?"""
    return bool(row["saturated"]) or p99_bound(row) >= CALIBRATION_LIMIT_MS


def verdict(row: dict[str, Any]) -> str:
    """One line per row; the self-check passing a level with a large error is the alarm."""
    err = row["err_p99_ms"]
    bound = p99_bound(row)
    if not row["gaps"]:
        return "no stamped gaps measured (did the mock run with --stamp-chunks?)"
    if not flagged(row) and err > CALIBRATION_LIMIT_MS:
        return (f"!!! CALIBRATION FAILURE: error bound {bound:.2f} ms but p99 |error| {err:.2f} ms "
                f"> {CALIBRATION_LIMIT_MS:g} ms !!!")
    if flagged(row):
        kind = "rightly" if err > CALIBRATION_LIMIT_MS else "conservatively"
        return f"flagged {kind} by the self-check (p99 |error| {err:.2f} ms, bound {bound:.2f} ms)"
    return f"ok: bound {bound:.2f} ms, p99 |error| {err:.2f} ms"


def measure_run(mode: str, run_dir: Path) -> list[dict[str, Any]]:
    """One row per level: the gaps of successful requests that the analysis counts for that level.

    That is, the gaps whose ending chunk arrived in the level's measured window
    (``[start + warmup, end)``, as the analyzer assigns ITL samples; see
    analysis/windows.py), whichever level their request started in. Gaps that
    arrive outside every window (a level's warm-up, after the run's end) judge
    nothing, and neither does the self-check's bound, which skips the warm-up too.
    """
    run = read_run_json(run_dir)
    records = read_requests(run_dir)
    windows, _ = level_windows(run, records)
    ok = records[records["ok"]]
    client_ms, server_ms, owner, arrival = stamped_chunks(ok)
    position = locate(arrival, windows)  # the analyzer's own assignment of times to windows
    levels = {int(level["index"]): level for level in run["levels"]}
    rows = []
    for p, window in enumerate(windows):
        level = levels.get(window.index)
        if level is None:
            continue  # bounds inferred from the records: run.json has no such level
        counted = position == p
        mine = ok[(ok["level_index"] == level["index"]) & ~ok["warmup"]]
        row: dict[str, Any] = {"mode": mode, "streams": int(level["concurrency"]), "requests": len(mine)}
        row.update(gap_stats(client_ms, server_ms, owner, counted))
        row.update(self_check(level))
        row["verdict"] = verdict(row)
        rows.append(row)
    return rows


def calibration(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """For the levels the self-check passed: the worst p99 |error|, and any level over the limit."""
    passed = [r for r in rows if not flagged(r) and r["gaps"]]
    worst = max(passed, key=lambda r: r["err_p99_ms"], default=None)
    failures = [f"{r['mode']}@{r['streams']}" for r in passed if r["err_p99_ms"] > CALIBRATION_LIMIT_MS]
    return {
        "levels_passed": len(passed),
        "levels_flagged": sum(1 for r in rows if flagged(r)),
        "worst_passed_err_p99_ms": worst["err_p99_ms"] if worst else None,
        "worst_passed_level": f"{worst['mode']}@{worst['streams']}" if worst else None,
        "calibration_limit_ms": CALIBRATION_LIMIT_MS,
        "calibration_failures": failures,
    }


# -- output ----------------------------------------------------------------------------------

COLUMNS = [
    Column("mode", "mode"),
    Column("streams", "streams", "d"),
    Column("requests", "reqs", "d"),
    Column("itl_p50_ms", "ITL p50", ".2f"),
    Column("itl_p99_ms", "ITL p99", ".2f"),
    Column("true_itl_p50_ms", "true p50", ".2f"),
    Column("true_itl_p99_ms", "true p99", ".2f"),
    Column("err_p50_ms", "|err| p50", ".3f"),
    Column("err_p99_ms", "|err| p99", ".3f"),
    Column("err_max_ms", "|err| max", ".2f"),
    Column("lag_p50_ms", "lag p50", ".3f"),
    Column("lag_p99_ms", "lag p99", ".3f"),
    Column("cpu_pct", "CPU %", ".0f"),
    Column("stamp_delay_p99_ms", "stamp delay p99", ".2f"),
    Column("itl_error_bound_ms", "ITL bound", ".2f"),
    Column("loop_lag_p99_ms", "loop lag p99", ".2f"),
    Column("reader_batch_p99_ms", "batch p99", ".2f"),
    Column("reader_lag_p99_ms", "reader lag p99", ".2f"),
    Column("saturated", "flagged"),
]


def report(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = ["chunk-timing fidelity (ms; error = client gap − server gap, lag = arrival − send)",
             format_table(rows, COLUMNS), ""]
    lines += [f"{r['mode']:>8} @ {r['streams']:>4} streams: {r['verdict']}" for r in rows]
    worst = summary["worst_passed_err_p99_ms"]
    lines.append("")
    if worst is None:
        lines.append("calibration: the self-check flagged every level; nothing to check")
    else:
        lines.append(
            f"calibration: {summary['levels_passed']} level(s) passed the self-check, "
            f"{summary['levels_flagged']} flagged; worst p99 |error| among the passed: "
            f"{worst:.3f} ms ({summary['worst_passed_level']}), limit {CALIBRATION_LIMIT_MS:g} ms"
        )
    if summary["calibration_failures"]:
        lines.append("!!! CALIBRATION FAILURE at " + ", ".join(summary["calibration_failures"])
                     + ": the self-check passed levels whose chunk times are wrong by more than "
                     f"{CALIBRATION_LIMIT_MS:g} ms !!!")
    return "\n".join(lines)


# -- command line ----------------------------------------------------------------------------


def positive_ints(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,50,100; got {text!r}")
    return values


def names_list(allowed: dict, what: str):
    """An argparse type: comma-separated names, each one of ``allowed``'s keys."""
    def parse(text: str) -> list[str]:
        names = [m.strip() for m in text.split(",") if m.strip()]
        if not names or set(names) - set(allowed):
            raise argparse.ArgumentTypeError(f"{what} are {', '.join(allowed)}; got {text!r}")
        return names
    return parse


mode_list = names_list(MODES, "modes")
tls_reads_list = names_list(TLS_READS, "TLS readers")


def parse_args(argv: list[str] | None = None) -> tuple[Config, argparse.Namespace]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=positive_ints, default=[1, 50, 100, 200, 400], help="stream counts (levels)")
    ap.add_argument("--level-duration", type=float, default=10.0, metavar="S", help="seconds per level (default 10)")
    ap.add_argument("--warmup", type=float, default=2.0, metavar="S", help="warmup per level, excluded (default 2)")
    ap.add_argument("--modes", type=mode_list, default=list(MODES), help="single,workers2 (default both)")
    ap.add_argument("--tokens-per-chunk", type=int, default=1, metavar="K", help="tokens per chunk (default 1)")
    ap.add_argument("--https", action="store_true", help="serve the mock over HTTPS")
    ap.add_argument("--tls-reads", type=tls_reads_list, default=["reactor"],
                    help="with --https: who reads the TLS streams, one run each: reactor,greenlets (default reactor)")
    ap.add_argument("--json", type=Path, metavar="PATH", help="also write the rows and summary as JSON")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="keep the run folders in DIR (default: a temporary folder)")
    args = ap.parse_args(argv)
    if not 0 <= args.warmup < args.level_duration:
        ap.error(f"--warmup ({args.warmup:g}) must be shorter than --level-duration ({args.level_duration:g})")
    if args.tls_reads != ["reactor"] and not args.https:
        ap.error("--tls-reads needs --https")
    return Config(args.streams, args.level_duration, args.warmup, args.modes, args.tokens_per_chunk, args.https,
                  tuple(args.tls_reads)), args


def run(cfg: Config, work: Path) -> dict[str, Any]:
    """Every mode, measured; the JSON payload."""
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for mode in cfg.modes:
        for reads in cfg.tls_reads:
            label = mode if reads == "reactor" else f"{mode}/{reads}"
            rows += measure_run(label, run_mode(mode, cfg, work, reads))
    return {
        "benchmark": "fidelity",
        "config": {**asdict(cfg), "decode_ms": DECODE_MS, "max_tokens": MAX_TOKENS},
        "rows": rows,
        "summary": calibration(rows),
        "elapsed_s": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> int:
    cfg, args = parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        payload = run(cfg, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-fidelity-") as tmp:
            payload = run(cfg, Path(tmp))
    print(report(payload["rows"], payload["summary"]))
    if args.json:
        write_json(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
