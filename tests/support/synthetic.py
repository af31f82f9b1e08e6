"""Synthetic runs with known answers, for tests and benchmarks.

Building 100k records as Python dicts (10M chunk floats) is slower than
analyzing them, so :func:`bulk_requests` builds the Arrow table column-wise
with numpy and casts it to :data:`loadtest.records.SCHEMA`, which is exactly
what :func:`loadtest.records.read_requests` would return for the same data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from loadtest.records import SCHEMA


def level_plan(concurrencies: list[int], level_s: float, t0: float = 1_764_000_000.0) -> list[dict[str, Any]]:
    """run.json ``levels`` for back-to-back levels of ``level_s`` seconds each."""
    return [
        {
            "index": i,
            "concurrency": c,
            "start_wall": t0 + i * level_s,
            "end_wall": t0 + (i + 1) * level_s,
            "refine": False,
            "client": {
                "loop_lag_p99_ms": 0.5,
                "loop_lag_max_ms": 2.0,
                "cpu_pct": 10.0,
                "saturated": False,
                "reason": None,
            },
        }
        for i, c in enumerate(concurrencies)
    ]


def bulk_requests(
    n_requests: int,
    chunks_per_request: int,
    levels: list[dict[str, Any]],
    *,
    itl_ms: float = 20.0,
    ttft_ms: float = 200.0,
    seed: int = 0,
) -> pd.DataFrame:
    """``n_requests`` successful streaming requests spread evenly over ``levels``.

    Chunk gaps are exponential with mean ``itl_ms``; one token per chunk.
    """
    rng = np.random.default_rng(seed)
    n, m = n_requests, chunks_per_request
    level_of = np.repeat(np.arange(len(levels)), int(np.ceil(n / max(1, len(levels)))))[:n]
    starts = np.array([lv["start_wall"] for lv in levels])[level_of]
    spans = np.array([lv["end_wall"] - lv["start_wall"] for lv in levels])[level_of]
    start_wall = starts + rng.uniform(0, 1, n) * spans * 0.9
    ttft = rng.gamma(4.0, ttft_ms / 4.0, n)
    gaps = rng.exponential(itl_ms, (n, m))
    gaps[:, 0] = ttft
    chunk_ms = np.cumsum(gaps, axis=1)
    e2e = chunk_ms[:, -1] + 1.0
    offsets = pa.array(np.arange(0, n * m + 1, m, dtype=np.int32))
    columns = {
        "request_id": pa.array([f"local-{i}" for i in range(n)]),
        "worker": pa.array(np.full(n, "local", dtype=object)),
        "user": pa.array(np.arange(n) % 64, type=pa.int32()),
        "level": pa.array(np.array([lv["concurrency"] for lv in levels])[level_of], type=pa.int32()),
        "level_index": pa.array(level_of, type=pa.int32()),
        "warmup": pa.array(np.zeros(n, dtype=bool)),
        "start_wall": pa.array(start_wall),
        "ttfb_ms": pa.array(ttft * 0.9),
        "ttft_ms": pa.array(ttft),
        "e2e_ms": pa.array(e2e),
        "chunk_ms": pa.ListArray.from_arrays(offsets, pa.array(chunk_ms.ravel())),
        "chunk_tokens": pa.ListArray.from_arrays(offsets, pa.array(np.ones(n * m, dtype=np.int32))),
        "prompt_tokens": pa.array(np.full(n, 128, dtype=np.int32)),
        "completion_tokens": pa.array(np.full(n, m, dtype=np.int32)),
        "token_source": pa.array(np.full(n, "usage", dtype=object)),
        "status": pa.array(np.full(n, 200, dtype=np.int32)),
        "ok": pa.array(np.ones(n, dtype=bool)),
        "error_kind": pa.nulls(n, pa.string()),
        "error": pa.nulls(n, pa.string()),
    }
    # columns this generator does not model (e.g. added to the schema later) are null
    arrays = [columns.get(f.name, pa.nulls(n, f.type)) for f in SCHEMA]
    return pa.Table.from_arrays(arrays, schema=SCHEMA).to_pandas()


# -- small, exact runs built from record dicts ------------------------------------------------

T0 = 1_764_000_000.0


def request_row(**fields: Any) -> dict[str, Any]:
    """One successful record with defaults; override any :data:`SCHEMA` field.

    Defaults: TTFT 100 ms, 5 one-token chunks 20 ms apart, e2e = last chunk + 1 ms.
    """
    chunk_ms = fields.get("chunk_ms", [100.0 + 20.0 * i for i in range(5)]) or []
    row: dict[str, Any] = {
        "request_id": "local-0",
        "worker": "local",
        "user": 0,
        "level": 1,
        "level_index": 0,
        "warmup": False,
        "start_wall": T0,
        "ttfb_ms": (chunk_ms[0] - 5.0) if chunk_ms else 50.0,
        "ttft_ms": chunk_ms[0] if chunk_ms else None,
        "e2e_ms": (chunk_ms[-1] + 1.0) if chunk_ms else 100.0,
        "chunk_ms": chunk_ms,
        "chunk_tokens": [1] * len(chunk_ms),
        "prompt_tokens": 16,
        "completion_tokens": len(chunk_ms),
        "token_source": "usage",
        "status": 200,
        "ok": True,
        "error_kind": None,
        "error": None,
    }
    row.update(fields)
    return row


def failed_row(kind: str = "timeout", e2e_ms: float = 30_000.0, **fields: Any) -> dict[str, Any]:
    """A failed record without content (e.g. a timeout before the first token)."""
    defaults: dict[str, Any] = {
        "ttfb_ms": None,
        "ttft_ms": None,
        "e2e_ms": e2e_ms,
        "chunk_ms": [],
        "chunk_tokens": [],
        "completion_tokens": None,
        "status": 0 if kind in ("timeout", "connect") else 500,
        "ok": False,
        "error_kind": kind,
        "error": f"simulated {kind}",
    }
    defaults.update(fields)
    return request_row(**defaults)


def closed_loop_rows(
    level_index: int,
    concurrency: int,
    start_wall: float,
    duration_s: float,
    *,
    ttft_ms: float = 100.0,
    itl_ms: float = 20.0,
    chunks: int = 10,
    warmup_s: float = 0.0,
    fail_every: int = 0,
    fail_kind: str = "http_5xx",
    seed: int = 0,
    jitter: float = 0.0,
    stagger: bool = False,
) -> list[dict[str, Any]]:
    """Records of ``concurrency`` users sending back-to-back requests for ``duration_s``.

    Latencies are exact (``jitter=0``) or scaled by ``1 + jitter·N(0,1)``
    (clipped at 10%). Every ``fail_every``-th request fails fast (50 ms) with
    ``fail_kind``. The warmup flag is set as the load shape would. The users start
    together (1 ms apart), or with ``stagger`` spread evenly over one request, as
    real closed-loop users drift apart: then at any moment each is at another point
    of its request.
    """
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    spread_s = (ttft_ms + itl_ms * (chunks - 1)) / 1000.0 / concurrency if stagger else 0.001
    for user in range(concurrency):
        t = start_wall + user * spread_s
        while t < start_wall + duration_s:
            seq = len(rows)
            common = {
                "request_id": f"local-{level_index}-{seq}",
                "user": user,
                "level": concurrency,
                "level_index": level_index,
                "warmup": t < start_wall + warmup_s,
                "start_wall": t,
            }
            if fail_every and (seq + 1) % fail_every == 0:
                row = failed_row(fail_kind, e2e_ms=50.0, **common)
            else:
                scale = max(0.1, 1.0 + jitter * rng.standard_normal()) if jitter else 1.0
                first = ttft_ms * scale
                chunk_ms = [first + itl_ms * scale * i for i in range(chunks)]
                row = request_row(chunk_ms=chunk_ms, **common)
            rows.append(row)
            t += row["e2e_ms"] / 1000.0 + 0.001
    return rows


def rate_level_plan(rates: list[float], level_s: float, hold_s: float, t0: float = T0) -> list[dict[str, Any]]:
    """run.json ``levels`` of an open loop: each rate for ``level_s`` seconds, then its hold (the rate kept
    for ``hold_s`` more while its measured requests end, load/hold.py) before the next rate starts."""
    plan = level_plan([0] * len(rates), level_s + hold_s, t0=t0)
    for lv, rate in zip(plan, rates):
        end = lv["start_wall"] + level_s
        lv.update(end_wall=end, rate_rps=float(rate),
                  hold={"start_wall": end, "end_wall": end + hold_s, "ended": "drained", "censored": 0, "cap_s": 30.0})
    return plan


def open_loop_rows(
    level_index: int,
    rate: float,
    start_wall: float,
    duration_s: float,
    *,
    ttft_ms: float = 50.0,
    itl_ms: float = 10.0,
    chunks: int = 8,
    slots: int | None = None,
    warmup_s: float = 0.0,
    fail_every: int = 0,
    seed: int = 0,
    jitter: float = 0.0,
) -> list[dict[str, Any]]:
    """Records of Poisson arrivals at ``rate`` req/s for ``duration_s`` (the level and its hold), sent on time.

    Each request takes ``ttft_ms`` to its first token and ``itl_ms`` a token after it (times
    ``1 + jitter·N(0,1)``, clipped at 10%); with ``slots`` the server runs that many at once and
    queues the rest first come, first served (its wait is in the TTFT, measured from the scheduled
    time as the open loop measures it), so past ``slots / life`` req/s it falls behind. Every
    ``fail_every``-th request fails fast (50 ms, HTTP 5xx).
    """
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, int(rate * duration_s * 2) + 20)
    arrivals = start_wall + np.cumsum(gaps)
    arrivals = arrivals[arrivals < start_wall + duration_s]
    free = np.full(slots or 1, -np.inf)
    rows: list[dict[str, Any]] = []
    for seq, t in enumerate(arrivals):
        common = {"request_id": f"local-{level_index}-{seq}", "user": seq % 64, "level": 0, "level_index": level_index,
                  "warmup": t < start_wall + warmup_s, "start_wall": float(t), "rate_rps": float(rate),
                  "scheduled_wall": float(t), "schedule_lag_ms": 0.0}
        if fail_every and (seq + 1) % fail_every == 0:
            rows.append(failed_row("http_5xx", e2e_ms=50.0, **common))
            continue
        scale = max(0.1, 1.0 + jitter * rng.standard_normal()) if jitter else 1.0
        life_s = (ttft_ms + itl_ms * (chunks - 1)) * scale / 1000.0
        wait_s = 0.0
        if slots:
            slot = int(np.argmin(free))
            wait_s = max(0.0, free[slot] - t)
            free[slot] = t + wait_s + life_s
        first = ttft_ms * scale + wait_s * 1000.0
        rows.append(request_row(chunk_ms=[first + itl_ms * scale * i for i in range(chunks)], **common))
    return rows


def run_dict(
    levels: list[dict[str, Any]],
    *,
    warmup_s: float = 0.0,
    slo: dict[str, Any] | None = None,
    name: str = "synthetic",
) -> dict[str, Any]:
    """A run.json dict around ``levels`` (see :func:`level_plan`)."""
    return {
        "format": 1,
        "name": name,
        "tool_version": "0.1.0",
        "python": "3.11",
        "locust": "2.47.0",
        "host": {"hostname": "test", "cpus": 2, "platform": "linux"},
        "target": {"base_url": "http://127.0.0.1:8000/v1", "model": "mock-model", "api": "chat"},
        "scenario": {"name": name, "slo": slo or {}},
        "warmup_s": warmup_s,
        "started_wall": min((lv["start_wall"] for lv in levels), default=T0),
        "ended_wall": max((lv["end_wall"] for lv in levels if lv.get("end_wall")), default=T0),
        "complete": True,
        "levels": levels,
        "workers": ["local"],
        "workers_lost": [],
    }


def to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Record dicts → the DataFrame ``read_requests`` would return."""
    from loadtest.records import records_to_table

    return records_to_table(rows).to_pandas()


#: SLOs of :func:`write_sample_run`; its capacity under them is 4 (the binding SLO is TTFT p95).
SAMPLE_SLO: dict[str, Any] = {"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 45}, "max_error_rate": 0.01}


def write_sample_run(run_dir: Any, slo: dict[str, Any] | None = None) -> Any:
    """Write a small run folder the way the recorder does (part files, then merge).

    Levels 4, 1, 8, 2 (run order is not concurrency order), 15 s each with 2 s
    warmup; at c users TTFT is 100·c ms and ITL 10·c ms; at 8 users 40 extra
    requests time out. Under :data:`SAMPLE_SLO` the capacity is 4 and level 8
    fails on TTFT p95 (+inf: more than 5% timed out).
    """
    from pathlib import Path

    from loadtest.records import RequestWriter, records_to_table, write_run_json

    run_dir = Path(run_dir)
    levels = level_plan([4, 1, 8, 2], 15.0)
    rows: list[dict[str, Any]] = []
    for lv in levels:
        c = lv["concurrency"]
        rows += closed_loop_rows(
            lv["index"], c, lv["start_wall"], 12.0, ttft_ms=100.0 * c, itl_ms=10.0 * c, warmup_s=2.0
        )
    rows += [
        failed_row("timeout", request_id=f"timeout-{i}", level=8, level_index=2, start_wall=T0 + 33 + 0.1 * i)
        for i in range(40)
    ]
    writer = RequestWriter(run_dir)
    writer.write(records_to_table(rows[: len(rows) // 2]))
    writer.write(records_to_table(rows[len(rows) // 2 :]))
    writer.close()
    run = run_dict(levels, warmup_s=2.0, slo=SAMPLE_SLO if slo is None else slo, name="chat-capacity")
    write_run_json(run_dir, run)
    return run_dir


def write_run_folder(folder: Any, rows: list[dict[str, Any]], plan: list[dict[str, Any]], scenario: dict[str, Any],
                     **run_fields: Any) -> Any:
    """Records, run.json (with its ``scenario``, and ``run_fields``: an open loop's ``load_mode``) and an
    analysis: a run folder as ``loadtest run`` leaves it."""
    import contextlib  # only the run-folder writers need these (and the CLI, to analyze it)
    import io
    from pathlib import Path

    from loadtest.cli import main
    from loadtest.records import RequestWriter, records_to_table, write_run_json

    folder = Path(folder)
    writer = RequestWriter(folder)
    writer.write(records_to_table(rows))
    writer.close()
    run = run_dict(plan, warmup_s=1.0, slo=scenario["slo"], name=scenario["name"])
    run["scenario"] = scenario
    run.update(run_fields)
    write_run_json(folder, run)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["analyze", str(folder)]) == 0
    return folder


def itl_bound_fleet_run(levels: list[int], level_s: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Records and run.json of a closed loop whose ITL is 10·c ms (ITL p95 ≤ 65: capacity 6, first failing 8
    over levels 2, 4, 6, 8), 1 s warm-up: the fleet tests' common run, before each adds its scrapes."""
    plan = level_plan(levels, level_s)
    rows: list[dict[str, Any]] = []
    for lv in plan:
        rows += closed_loop_rows(lv["index"], lv["concurrency"], lv["start_wall"], level_s,
                                 itl_ms=10.0 * lv["concurrency"], warmup_s=1.0)
    return rows, run_dict(plan, warmup_s=1.0, slo={"itl_ms": {"p95": 65}})
