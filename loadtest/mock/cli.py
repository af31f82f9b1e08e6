"""``loadtest mock``: the options, and serving until SIGINT/SIGTERM.

The option names are an interface (scenarios, docker-compose, benchmarks and
:class:`~loadtest.mock.process.MockServer` pass them), and each maps 1:1 to a
field of :class:`~loadtest.mock.config.MockConfig`, which validates them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys

from loadtest.mock.config import MockConfig
from loadtest.mock.timing import run as run_precise

_D = MockConfig()  # the defaults, in one place

#: The line printed once the socket is listening; MockServer parses it.
LISTENING = "loadtest mock listening on {scheme}://{host}:{port}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``loadtest mock`` options to ``parser``."""
    parser.description = (
        "Serve a simulated OpenAI-compatible LLM: a continuous-batching model whose "
        "latencies follow from the options below (see loadtest/mock/MODEL.md)."
    )
    net = parser.add_argument_group("server")
    net.add_argument("--host", default=_D.host, help="address to bind (default: %(default)s)")
    net.add_argument(
        "--port", type=int, default=_D.port, help="port; 0 = any free port (default: %(default)s)"
    )
    net.add_argument("--tls-cert", default=None, metavar="PEM", help="serve HTTPS with this certificate (with --tls-key)")
    net.add_argument("--tls-key", default=None, metavar="PEM", help="the certificate's private key")
    net.add_argument(
        "--model-name",
        default=_D.model_name,
        help="the model /v1/models lists; any is accepted (default: %(default)s)",
    )
    net.add_argument(
        "--api-key", default=_D.api_key, metavar="KEY", help="require 'Authorization: Bearer KEY'"
    )

    eng = parser.add_argument_group("engine model (see MODEL.md)")
    eng.add_argument(
        "--max-batch", type=int, default=_D.max_batch, metavar="N",
        help="sequences decoded at once; the rest queue (default: %(default)s)",
    )
    eng.add_argument(
        "--decode-base-ms", type=float, default=_D.decode_base_ms, metavar="MS",
        help="fixed cost of a decode step (default: %(default)s)",
    )
    eng.add_argument(
        "--decode-per-seq-ms", type=float, default=_D.decode_per_seq_ms, metavar="MS",
        help="added step cost per running sequence (default: %(default)s)",
    )
    eng.add_argument(
        "--prefill-per-token-ms", type=float, default=_D.prefill_per_token_ms, metavar="MS",
        help="added step cost per prompt token admitted in that step (default: %(default)s)",
    )
    eng.add_argument(
        "--tokens-per-chunk", type=int, default=_D.tokens_per_chunk, metavar="K",
        help="tokens per SSE chunk (the last chunk may carry fewer) (default: %(default)s)",
    )

    roof = parser.add_argument_group(
        "roofline mode (see MODEL.md): step = overhead + max(memory floor, compute floor); "
        "on when --roofline-hbm-gbps is given, replacing --decode-base-ms/--decode-per-seq-ms/--prefill-per-token-ms"
    )
    roof.add_argument(
        "--roofline-hbm-gbps", type=float, default=_D.roofline_hbm_gbps, metavar="GB/S",
        help="declared memory bandwidth, GB/s (turns the mode on)",
    )
    roof.add_argument(
        "--roofline-tflops", type=float, default=_D.roofline_tflops, metavar="TFLOPS",
        help="declared dense throughput, TFLOP/s (default: %(default)s)",
    )
    roof.add_argument(
        "--roofline-params-b", type=float, default=_D.roofline_params_b, metavar="B",
        help="model parameters, billions (default: %(default)s)",
    )
    roof.add_argument(
        "--roofline-bytes-per-weight", type=float, default=_D.roofline_bytes_per_weight, metavar="BYTES",
        help="bytes per weight of the served precision (default: %(default)s)",
    )
    roof.add_argument(
        "--roofline-kv-bytes-per-token", type=float, default=_D.roofline_kv_bytes_per_token, metavar="BYTES",
        help="KV-cache bytes per context token, read every step (default: %(default)s)",
    )
    roof.add_argument(
        "--roofline-overhead-ms", type=float, default=_D.roofline_overhead_ms, metavar="MS",
        help="fixed cost added to every step (scheduler, launch) (default: %(default)s)",
    )
    eng.add_argument(
        "--drift", type=float, default=_D.drift, metavar="SD",
        help="run-to-run drift: every step cost times exp(N(0, SD)), drawn once at start "
        "(e.g. 0.05: a server about 5%% faster or slower each start; default: %(default)s)",
    )
    eng.add_argument(
        "--drift-seed", type=int, default=_D.drift_seed, metavar="N",
        help="seed of the drift draw (default: random each start)",
    )

    eng.add_argument(
        "--prefix-cache-blocks", type=int, default=_D.prefix_cache_blocks, metavar="N",
        help="model a prefix cache of N blocks (LRU): cached prompt tokens skip prefill and are reported "
        "in usage.prompt_tokens_details.cached_tokens and vllm:prefix_cache_* (default: %(default)s, none)",
    )
    eng.add_argument(
        "--prefix-cache-block-tokens", type=int, default=_D.prefix_cache_block_tokens, metavar="N",
        help="tokens per prefix-cache block (default: %(default)s)",
    )

    flt = parser.add_argument_group("fault injection (rates are per-request probabilities)")
    flt.add_argument(
        "--fail-rate",
        type=float,
        default=_D.fail_rate,
        metavar="P",
        help="answer HTTP 500 (default: %(default)s)",
    )
    flt.add_argument(
        "--rate-limit-queue", type=int, default=_D.rate_limit_queue, metavar="N",
        help="answer HTTP 429 + Retry-After when more than N requests would wait for a slot",
    )
    flt.add_argument(
        "--retry-after-s", type=int, default=_D.retry_after_s, metavar="S",
        help="the Retry-After of a 429, in seconds (default: %(default)s)",
    )
    flt.add_argument(
        "--drop-rate", type=float, default=_D.drop_rate, metavar="P",
        help="cut the response half-way (no [DONE]) (default: %(default)s)",
    )
    flt.add_argument(
        "--malformed-rate", type=float, default=_D.malformed_rate, metavar="P",
        help="make one mid-stream chunk invalid JSON (default: %(default)s)",
    )
    flt.add_argument(
        "--stall-rate", type=float, default=_D.stall_rate, metavar="P",
        help="pause half-way for --stall-s seconds, holding the batch slot (default: %(default)s)",
    )
    flt.add_argument(
        "--stall-s",
        type=float,
        default=_D.stall_s,
        metavar="S",
        help="length of a stall (default: %(default)s)",
    )
    flt.add_argument(
        "--hang-rate", type=float, default=_D.hang_rate, metavar="P",
        help="never answer (no status, no byte) until the client gives up (default: %(default)s)",
    )
    flt.add_argument(
        "--broken-json-rate", type=float, default=_D.broken_json_rate, metavar="P",
        help="cut the closing character of a tool call's or JSON-schema answer's JSON (default: %(default)s)",
    )
    flt.add_argument(
        "--seed", type=int, default=_D.seed, help="seed of the fault draws (default: random)"
    )

    eng.add_argument(
        "--embedding-dim", type=int, default=_D.embedding_dim, metavar="N",
        help="floats per vector in a /v1/embeddings answer, whose cost is the prefill of its inputs' tokens "
        "(default: %(default)s)",
    )
    eng.add_argument(
        "--image-tokens", type=int, default=_D.image_tokens, metavar="N",
        help="prompt tokens each image_url part costs, before its pixels (default: %(default)s)",
    )
    eng.add_argument(
        "--pixels-per-token", type=int, default=_D.pixels_per_token, metavar="N",
        help="an image costs one more prompt token per N pixels (28 x 28 = 784, Qwen2-VL's; default: %(default)s)",
    )
    eng.add_argument(
        "--tool-call-style", choices=("openai", "vllm"), default=_D.tool_call_style,
        help="how streamed tool calls are chunked: OpenAI's (role + header in one chunk) or vLLM's "
        "(role chunk, then the name, then the arguments) (default: %(default)s)",
    )

    ins = parser.add_argument_group("instrumentation")
    ins.add_argument(
        "--stamp-chunks", action="store_true", default=_D.stamp_chunks,
        help='add "mock_sent": time.perf_counter() at write time to every chunk',
    )
    ins.add_argument(
        "--request-log", default=_D.request_log, metavar="FILE",
        help="append one JSON line per streamed request (arrival, first token, end, outcome, prompt)",
    )
    ins.add_argument(
        "--arrival-log", default=_D.arrival_log, metavar="FILE",
        help="append one line per completions request as it arrives, unbuffered: "
        "a count that survives kill -9 of the mock",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM; 0 on a clean stop. Bad options raise InputError."""
    config = MockConfig.from_args(args)
    run_precise(_main(config))
    return 0


async def _main(config: MockConfig) -> None:
    from loadtest.mock.serving import serve  # aiohttp only when serving

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def ready(host: str, port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        scheme = "https" if config.tls_cert else "http"
        print(LISTENING.format(scheme=scheme, host=shown, port=port), flush=True)
        # Everything allocated so far lives for the whole run: keep the cyclic
        # GC from re-scanning it, which shortens collections under load.
        gc.collect()
        gc.freeze()

    try:
        await serve(config, stop=stop, on_ready=ready)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    print("loadtest mock stopped", file=sys.stderr, flush=True)
