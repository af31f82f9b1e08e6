"""Every option of the mock, validated once, in one frozen value.

The server, the engine and the fault injector read a :class:`MockConfig` and
nothing else, so that the model's behaviour is fully described by this value
(and can be logged, compared, or turned back into a command line with
:meth:`MockConfig.to_argv` for a subprocess).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
from dataclasses import dataclass, fields

from loadtest.errors import InputError

#: Output length when a request names no ``max_tokens`` (OpenAI's legacy
#: completions default; chat has no limit in OpenAI, but a mock must stop).
DEFAULT_MAX_TOKENS = 16

#: Upper bound on ``max_tokens`` so a typo cannot pin a slot for hours.
MAX_MAX_TOKENS = 1_000_000


@dataclass(frozen=True)
class MockConfig:
    """The mock's parameters. Field names match the CLI options (``--max-batch`` is ``max_batch``).

    Times in the engine model are in milliseconds because that is the unit
    people quote for ITL; ``stall_s`` and ``retry_after_s`` are in seconds
    because they are human-scale pauses.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    model_name: str = "mock-model"
    # The engine model (see MODEL.md).
    max_batch: int = 256
    decode_base_ms: float = 10.0
    decode_per_seq_ms: float = 0.5
    prefill_per_token_ms: float = 0.02
    tokens_per_chunk: int = 1
    #: Floats per vector in an /v1/embeddings answer (embeddings.py).
    embedding_dim: int = 16
    #: Prompt tokens per image_url part, plus one per ``pixels_per_token`` pixels (vision.py).
    image_tokens: int = 64
    pixels_per_token: int = 784
    # Roofline mode (roofline.py, MODEL.md): off while roofline_hbm_gbps is None; when on,
    # step times follow these instead of decode_base_ms/decode_per_seq_ms/prefill_per_token_ms.
    roofline_hbm_gbps: float | None = None
    roofline_tflops: float = 100.0
    roofline_params_b: float = 7.0
    roofline_bytes_per_weight: float = 2.0
    roofline_kv_bytes_per_token: float = 0.0
    roofline_overhead_ms: float = 0.0
    #: Run-to-run drift: every step cost is multiplied by one factor exp(N(0, drift)) drawn when the
    #: mock starts (from ``drift_seed``), as a real server is a few percent faster or slower each time
    #: it is started (warm-up, caches, CPU frequency, neighbours). 0: no drift.
    drift: float = 0.0
    drift_seed: int | None = None
    #: A prefix cache of this many blocks (mock/prefix_cache.py; 0: none), of this many tokens each.
    prefix_cache_blocks: int = 0
    prefix_cache_block_tokens: int = 16
    # Access.
    api_key: str | None = None
    #: Serve HTTPS with this certificate and key (PEM files), to test TLS clients.
    tls_cert: str | None = None
    tls_key: str | None = None
    # Fault injection: rates are per-request probabilities drawn from ``seed``.
    fail_rate: float = 0.0
    rate_limit_queue: int | None = None
    retry_after_s: int = 1
    drop_rate: float = 0.0
    malformed_rate: float = 0.0
    stall_rate: float = 0.0
    stall_s: float = 1.0
    hang_rate: float = 0.0
    #: Share of structured answers (tool calls, JSON schema) whose JSON is cut short (structured.py).
    broken_json_rate: float = 0.0
    seed: int | None = None
    #: How tool calls are chunked: "openai" or "vllm" (see structured.py).
    tool_call_style: str = "openai"
    # Instrumentation.
    stamp_chunks: bool = False
    #: Append one JSON line per streamed request to this file (see request_log.py).
    request_log: str | None = None
    #: Append one line per completions request as it arrives, unbuffered (see arrival_log.py).
    arrival_log: str | None = None

    def __post_init__(self) -> None:
        _check(0 <= self.port <= 65535, "--port", "must be between 0 and 65535")
        _check(bool(self.host), "--host", "must not be empty")
        _check(bool(self.model_name.strip()), "--model-name", "must not be empty")
        _check(self.max_batch >= 1, "--max-batch", "must be at least 1")
        for name in ("decode_base_ms", "decode_per_seq_ms", "prefill_per_token_ms", "stall_s"):
            value = getattr(self, name)
            _check(math.isfinite(value) and value >= 0, _flag(name), "must be a number >= 0")
        _check(
            self.roofline_hbm_gbps is None or (math.isfinite(self.roofline_hbm_gbps) and self.roofline_hbm_gbps > 0),
            "--roofline-hbm-gbps", "must be a number > 0",
        )
        for name in ("roofline_tflops", "roofline_params_b", "roofline_bytes_per_weight"):
            value = getattr(self, name)
            _check(math.isfinite(value) and value > 0, _flag(name), "must be a number > 0")
        for name in ("roofline_kv_bytes_per_token", "roofline_overhead_ms"):
            value = getattr(self, name)
            _check(math.isfinite(value) and value >= 0, _flag(name), "must be a number >= 0")
        _check(math.isfinite(self.drift) and 0 <= self.drift <= 1, "--drift", "must be between 0 and 1")
        _check(self.tokens_per_chunk >= 1, "--tokens-per-chunk", "must be at least 1")
        _check(1 <= self.embedding_dim <= 65536, "--embedding-dim", "must be between 1 and 65536")
        _check(self.image_tokens >= 0, "--image-tokens", "must be >= 0")
        _check(self.pixels_per_token >= 1, "--pixels-per-token", "must be at least 1")
        _check(self.tool_call_style in ("openai", "vllm"), "--tool-call-style", "must be openai or vllm")
        for name in ("fail_rate", "drop_rate", "malformed_rate", "stall_rate", "hang_rate", "broken_json_rate"):
            value = getattr(self, name)
            _check(0.0 <= value <= 1.0, _flag(name), "must be between 0 and 1")
        _check(
            self.rate_limit_queue is None or self.rate_limit_queue >= 0,
            "--rate-limit-queue",
            "must be >= 0",
        )
        _check(self.retry_after_s >= 0, "--retry-after-s", "must be >= 0")
        _check(self.api_key is None or bool(self.api_key), "--api-key", "must not be empty")
        _check((self.tls_cert is None) == (self.tls_key is None), "--tls-cert", "goes with --tls-key")
        for name in ("tls_cert", "tls_key"):
            path = getattr(self, name)
            _check(path is None or os.path.isfile(path), _flag(name), f"no such file: {path}")
        _check(self.prefix_cache_blocks >= 0, "--prefix-cache-blocks", "must be >= 0")
        _check(self.prefix_cache_block_tokens >= 1, "--prefix-cache-block-tokens", "must be at least 1")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> MockConfig:
        """Build from the namespace that :func:`loadtest.mock.cli.add_arguments` defined."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in names})

    def to_argv(self) -> list[str]:
        """The ``loadtest mock`` options that reproduce this config (defaults omitted)."""
        argv: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if isinstance(value, bool):
                if value:
                    argv.append(_flag(f.name))
                continue
            argv += [_flag(f.name), str(value)]
        return argv

    def slowdown(self) -> float:
        """The factor this start of the mock multiplies every step cost by (1.0 without ``drift``).

        Drawn once per process: the same ``drift_seed`` is the same "run" of the server; no seed,
        a fresh draw every start."""
        if self.drift <= 0:
            return 1.0
        rng = random.Random(f"drift-{self.drift_seed}") if self.drift_seed is not None else random.SystemRandom()
        return math.exp(rng.gauss(0.0, self.drift))

    def replace(self, **changes: object) -> MockConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _flag(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def _check(ok: bool, flag: str, message: str) -> None:
    if not ok:
        raise InputError(f"{flag}: {message}")
