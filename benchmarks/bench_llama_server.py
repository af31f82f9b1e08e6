"""The client's TTFT and ITL against llama-server's own per-request timings, at 1, 4 and 8 users.

A real llama.cpp ``llama-server`` (built by ``make real-server``, tiny random
model, 8 slots, one thread) is loaded by N closed-loop users for a few seconds
per level. llama-server returns, with each request's usage, its own
``timings``: ``prompt_ms`` (prompt processing) and ``predicted_ms`` over
``predicted_n`` tokens (generation, from the first sampled token to the last).
Per request we compare

- the client's generation span per gap, ``(last chunk − first chunk) / (n − 1)``
  (the mean ITL), with the server's ``predicted_ms / predicted_n``
  (llama.cpp's ``predicted_per_token_ms``), and
- the client's TTFT with the server's ``prompt_ms`` (TTFT also holds the HTTP
  exchange, the queue for a slot and the first token's sampling).

    python benchmarks/bench_llama_server.py [--levels 1,4,8] [--seconds 8] [--tokens 64] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import gevent
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from _table import Column, format_table, write_json  # noqa: E402
from support.realserver.server import start_llama_server  # noqa: E402

from loadtest.client.stream import StreamingClient  # noqa: E402
from loadtest.client.wire import build_body  # noqa: E402
from loadtest.workload.words import WORDS  # noqa: E402

COLUMNS = [
    Column("users", "users"),
    Column("requests", "requests"),
    Column("client_ttft_ms", "client TTFT mean", ".2f"),
    Column("server_prompt_ms", "server prompt_ms", ".2f"),
    Column("client_itl_ms", "client ITL mean", ".3f"),
    Column("server_token_ms", "server ms/token", ".3f"),
    Column("itl_diff_pct", "ITL diff %", "+.1f"),
    Column("client_tpot_ms", "client TPOT", ".3f"),
    Column("errors", "errors"),
    Column("resends", "resends"),
]


def run_level(base_url: str, model: str, users: int, seconds: float, tokens: int) -> dict:
    recs = []
    stop_at = time.monotonic() + seconds

    def user(index: int) -> None:
        client = StreamingClient(base_url, "completions", timeout_s=60)
        rng = np.random.default_rng(index)
        try:
            while time.monotonic() < stop_at:
                prompt = f"{rng.integers(1 << 30):x} " + " ".join(rng.choice(WORDS, 48))
                recs.append(client.send(build_body("completions", model, prompt, tokens)))
        finally:
            client.close()

    gevent.joinall([gevent.spawn(user, i) for i in range(users)], timeout=seconds + 120)
    ok = [r for r in recs if r.ok and r.server_timings and len(r.chunk_ms) > 1]
    itl = np.array([(r.chunk_ms[-1] - r.chunk_ms[0]) / (len(r.chunk_ms) - 1) for r in ok])
    server_token = np.array([r.server_timings["predicted_ms"] / r.server_timings["predicted_n"] for r in ok])
    tpot = np.array([(r.e2e_ms - r.ttft_ms) / (r.completion_tokens - 1) for r in ok])
    return {
        "users": users,
        "requests": len(recs),
        "client_ttft_ms": float(np.mean([r.ttft_ms for r in ok])),
        "server_prompt_ms": float(np.mean([r.server_timings["prompt_ms"] for r in ok])),
        "client_itl_ms": float(itl.mean()),
        "server_token_ms": float(server_token.mean()),
        "itl_diff_pct": float(100 * (itl.mean() / server_token.mean() - 1)),
        "client_tpot_ms": float(tpot.mean()),
        "errors": sum(not r.ok for r in recs),
        "resends": sum(r.resends for r in recs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,4,8")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    server = start_llama_server(Path(tempfile.mkdtemp(prefix="bench-llama-")), slots=8)
    rows = []
    try:
        for users in [int(x) for x in args.levels.split(",")]:
            rows.append(run_level(server.base_url, server.model, users, args.seconds, args.tokens))
            print(format_table(rows[-1:], COLUMNS) if len(rows) == 1 else format_table(rows[-1:], COLUMNS).splitlines()[-1],
                  flush=True)
    finally:
        server.stop()
    print()
    print(format_table(rows, COLUMNS))
    if args.json:
        write_json(args.json, {"rows": rows})


if __name__ == "__main__":
    main()
