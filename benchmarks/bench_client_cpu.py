"""CPU cost per chunk of the client path, in isolation, and the chunks/s one process sustains.

A subprocess replays prepared SSE bytes (benchmarks/_sse_server.py), so only
the client's CPU is counted (``time.process_time`` of this process). Two paths:

- ``loadtest``: our StreamingClient (one recv, one timestamp, C de-chunking,
  our SSE parser, orjson, array appends);
- ``naive``: what a straightforward Locust user does: geventhttpclient's
  ``readline`` per line, ``json.loads`` of every chunk, a Python list of dicts.

Paced mode (one event per read, as a real server sends them) gives the cost
per chunk including the wake-up; burst mode (the whole response at once) gives
the most chunks/s that one process can parse. The last column, and the line
under the table, give loadtest's CPU per chunk as a share of the naive path's
in the same run (the issue-31 goals: paced <= 0.25, burst <= 0.2); the JSON
has them as ``cpu_vs_naive`` per row and ``ratios`` per mode. ``--floor`` also
measures the floor under any paced reader (benchmarks/_floor_reader.c: epoll and
one stamped ``recvmsg`` per chunk in C, nothing parsed or recorded) against the
same server, printed on a line of its own and as ``floor`` in the JSON. Each path gets
``--seconds`` per mode, in ``--rounds`` slices that alternate with the other
path's, so that a shared machine's drifting load weighs on both alike.

    python benchmarks/bench_client_cpu.py [--seconds 5] [--streams 100] [--chunks 100] [--rounds 2] [--json PATH]
"""

from __future__ import annotations

import gevent.monkey

gevent.monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402
from geventhttpclient import HTTPClient  # noqa: E402

from loadtest.client.stream import StreamingClient  # noqa: E402
from loadtest.client.wire import build_body  # noqa: E402
from loadtest.load.session import tune_interpreter  # noqa: E402

SERVER = Path(__file__).with_name("_sse_server.py")
BODY = build_body("chat", "m", "hello " * 8, 100)


def start_server(chunks: int, interval_ms: float) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--chunks", str(chunks), "--interval-ms", str(interval_ms)],
        stdout=subprocess.PIPE, text=True,
    )
    port = int(proc.stdout.readline())
    return proc, port


def loadtest_path(port: int, stop_at: float, counts: list[int]) -> None:
    client = StreamingClient(f"http://127.0.0.1:{port}/v1", "chat", timeout_s=30)
    while time.monotonic() < stop_at:
        rec = client.send(BODY)
        if not rec.ok:
            raise RuntimeError(rec.error)
        counts.append(len(rec.chunk_ms))
    client.close()


def naive_path(port: int, stop_at: float, counts: list[int]) -> None:
    http = HTTPClient("127.0.0.1", port, concurrency=1, network_timeout=30)
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
    while time.monotonic() < stop_at:
        resp = http.request("POST", "/v1/chat/completions", body=BODY, headers=headers)
        chunks = []
        while True:
            line = resp.readline(b"\n")
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                continue
            obj = json.loads(data)
            if obj["choices"] and obj["choices"][0]["delta"].get("content"):
                chunks.append({"t": time.perf_counter(), "obj": obj})
        resp.release()
        counts.append(len(chunks))
    http.close()


PATHS = {"loadtest": loadtest_path, "naive": naive_path}


def measure(path: str, port: int, streams: int, seconds: float) -> dict:
    counts: list[int] = []
    stop_at = time.monotonic() + seconds
    cpu0, wall0 = time.process_time(), time.perf_counter()
    gevent.joinall([gevent.spawn(PATHS[path], port, stop_at, counts) for _ in range(streams)], raise_error=True)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"path": path, "chunks": sum(counts), "cpu_s": cpu, "wall_s": wall}


def measure_paths(port: int, streams: int, seconds: float, rounds: int) -> list[dict]:
    """Both paths, ``seconds`` each, in ``rounds`` alternating slices (ABBA order), summed per path.

    Why slices: on a shared machine the CPU a chunk costs drifts with what else
    runs; measuring one path after the other would put that drift into the
    ratio. Alternating slices expose both paths to the same conditions.
    """
    names = list(PATHS)
    total = {p: {"chunks": 0, "cpu_s": 0.0, "wall_s": 0.0} for p in names}
    for i in range(rounds):
        for path in (names if i % 2 == 0 else names[::-1]):
            part = measure(path, port, streams, seconds / rounds)
            for key in total[path]:
                total[path][key] += part[key]
    rows = []
    for path in names:
        t = total[path]
        rows.append({
            "path": path,
            "chunks": t["chunks"],
            "chunks_per_s": t["chunks"] / t["wall_s"],
            "cpu_us_per_chunk": t["cpu_s"] / t["chunks"] * 1e6,
            "cpu_pct": 100 * t["cpu_s"] / t["wall_s"],
        })
    return rows


#: The goals of issue 31, as ratios in one run: loadtest's CPU per chunk at most this share of the naive path's.
TARGET_RATIOS = {"paced": 0.25, "burst": 0.2}


FLOOR_SOURCE = Path(__file__).with_name("_floor_reader.c")


def measure_floor(seconds: float, streams: int, chunks: int) -> dict | None:
    """The C floor's CPU per chunk over paced streams (see _floor_reader.c); None without a C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None or not sys.platform.startswith("linux"):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "floor"
        subprocess.run([compiler, "-O2", "-o", str(binary), str(FLOOR_SOURCE)], check=True)
        server, port = start_server(chunks, 10.0)
        try:
            out = subprocess.run([str(binary), str(port), str(streams), str(seconds)], check=True,
                                 capture_output=True, text=True, timeout=seconds + 30).stdout.split()
        finally:
            server.terminate()
            server.wait(timeout=10)
    events, reads, wakes, cpu, wall = int(out[0]), int(out[1]), int(out[2]), float(out[3]), float(out[4])
    return {"path": "floor (C)", "mode": "paced", "streams": streams, "chunks": events, "reads_per_wake": reads / max(wakes, 1),
            "chunks_per_s": events / wall, "cpu_us_per_chunk": cpu / events * 1e6, "cpu_pct": 100 * cpu / wall}


def run(seconds: float, streams: int, chunks: int, rounds: int = 1) -> list[dict]:
    tune_interpreter()
    rows = []
    for mode, interval in (("paced", 10.0), ("burst", 0.0)):
        server, port = start_server(chunks, interval)
        try:
            for row in measure_paths(port, streams, seconds, rounds):
                row.update(mode=mode, streams=streams)
                rows.append(row)
        finally:
            server.terminate()
            server.wait(timeout=10)
    add_ratios(rows)
    return rows


def add_ratios(rows: list[dict]) -> None:
    """Each row's CPU per chunk over the naive path's in the same mode (``cpu_vs_naive``; naive rows: 1).

    Why a ratio: absolute µs do not travel between machines (or between hours on a
    shared one); two paths measured side by side in one run do.
    """
    naive = {r["mode"]: r["cpu_us_per_chunk"] for r in rows if r["path"] == "naive"}
    for r in rows:
        r["cpu_vs_naive"] = r["cpu_us_per_chunk"] / naive[r["mode"]] if naive.get(r["mode"]) else None


def ratios(rows: list[dict]) -> dict[str, float | None]:
    """loadtest's ``cpu_vs_naive`` per mode."""
    return {r["mode"]: r.get("cpu_vs_naive") for r in rows if r["path"] == "loadtest"}


def print_rows(rows: list[dict]) -> None:
    print(f"{'mode':6} {'path':9} {'streams':>7} {'chunks/s':>10} {'CPU µs/chunk':>13} {'CPU %':>6} {'× naive':>8}")
    for r in rows:
        vs = f"{r['cpu_vs_naive']:8.2f}" if r.get("cpu_vs_naive") is not None else f"{'-':>8}"
        print(f"{r['mode']:6} {r['path']:9} {r['streams']:7d} {r['chunks_per_s']:10.0f} {r['cpu_us_per_chunk']:13.1f} {r['cpu_pct']:6.0f} {vs}")
    parts = [f"{mode} {value:.2f} (target <= {TARGET_RATIOS[mode]:g})" for mode, value in ratios(rows).items()
             if value is not None]
    print("loadtest / naive CPU per chunk: " + ", ".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--streams", type=int, default=100)
    ap.add_argument("--chunks", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2,
                    help="alternate the two paths in this many slices of the --seconds each gets (default 2)")
    ap.add_argument("--json", type=Path, metavar="PATH", help="also write the rows as JSON")
    ap.add_argument("--floor", action="store_true",
                    help="also measure the C floor under any paced reader (needs a C compiler; Linux)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, not {args.rounds}")
    rows = run(args.seconds, args.streams, args.chunks, args.rounds)
    print_rows(rows)
    floor = measure_floor(args.seconds / 2, args.streams, args.chunks) if args.floor else None
    if floor is not None:
        naive = next(r["cpu_us_per_chunk"] for r in rows if r["mode"] == "paced" and r["path"] == "naive")
        floor["cpu_vs_naive"] = floor["cpu_us_per_chunk"] / naive
        print(f"paced floor (C: epoll and a stamped recvmsg per chunk, nothing parsed): {floor['cpu_us_per_chunk']:.1f} µs"
              f" per chunk, {floor['cpu_vs_naive']:.2f} × naive ({floor['reads_per_wake']:.2f} reads per wake-up)")
    elif args.floor:
        print("paced floor: not measured (no C compiler, or not Linux)")
    if args.json:
        config = {"seconds": args.seconds, "streams": args.streams, "chunks": args.chunks, "rounds": args.rounds}
        payload = {"benchmark": "client_cpu", "config": config, "rows": rows, "ratios": ratios(rows)}
        if floor is not None:
            payload["floor"] = floor
        args.json.write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
