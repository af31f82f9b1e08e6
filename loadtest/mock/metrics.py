"""``GET /metrics``: Prometheus text, with vLLM's metric names where vLLM has one.

Why vLLM's names: a dashboard or a scraper written for vLLM works against the
mock unchanged. Why our own ``loadtest_mock_*`` series too: tests reconcile
the client's records with what the server saw (``loadtest_mock_requests_total``
counts *every* request to the completions endpoints by the HTTP status it got),
and ``loadtest_mock_step_late_seconds_max`` tells whether the mock itself was
overloaded (its steps ran late), in which case its timings are not the model's.

:func:`parse_prometheus_text` is the reverse, for :class:`~loadtest.mock.process.MockServer`.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Iterable

from loadtest.mock.config import MockConfig
from loadtest.mock.engine import Engine

#: The ``status`` label for a request that the client abandoned before the
#: response was decided (nginx's convention; the client never sees it).
CLIENT_CLOSED = 499


class MockMetrics:
    """Counters kept by the server (the engine keeps its own)."""

    def __init__(self) -> None:
        self.requests_by_status: Counter[int] = Counter()
        self.faults: Counter[str] = Counter()
        #: How each completions request ended, exactly one per request: ok,
        #: malformed, dropped, client_left, shutdown, http_500, http_429, http_4xx.
        self.outcomes: Counter[str] = Counter()
        #: ``process_start_time_seconds``, as prometheus_client exports it in vLLM, SGLang and TGI:
        #: what tells two replicas behind one URL apart.
        self.started_wall = time.time()


def _cache_families(labels: str, cache: Any) -> list[str]:
    """vLLM's (v1) prefix-cache counters, in tokens: looked up, and of them found cached."""
    if cache is None:
        return []
    return [
        _family("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
                [(labels, cache.queries)]),
        _family("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
                [(labels, cache.hits)]),
    ]


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _family(name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]]) -> str:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{labels} {float(value)!r}" for labels, value in samples]
    return "\n".join(lines)


def render(config: MockConfig, engine: Engine, metrics: MockMetrics, cache: Any = None) -> bytes:
    """The exposition text (format 0.0.4); with a prefix cache (mock/prefix_cache.py) vLLM's counters of it."""
    m = f'{{model_name="{_esc(config.model_name)}"}}'
    families = _cache_families(m, cache) + [
        _family(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            [("", metrics.started_wall)],
        ),
        _family(
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            [(m, engine.running)],
        ),
        _family(
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            [(m, engine.waiting)],
        ),
        _family(
            "vllm:kv_cache_usage_perc",
            "gauge",
            "Fraction of batch slots in use (the mock's stand-in for KV-cache usage).",
            [(m, engine.running / engine.max_batch)],
        ),
        _family(
            "vllm:prompt_tokens_total",
            "counter",
            "Number of prefill tokens processed.",
            [(m, engine.prompt_tokens_total)],
        ),
        _family(
            "vllm:generation_tokens_total",
            "counter",
            "Number of generation tokens processed.",
            [(m, engine.generation_tokens_total)],
        ),
        _family(
            "vllm:request_success_total",
            "counter",
            "Count of successfully processed requests.",
            [
                (
                    f'{{finished_reason="length",model_name="{_esc(config.model_name)}"}}',
                    engine.success_total,
                )
            ],
        ),
        _family(
            "loadtest_mock_requests_total",
            "counter",
            "Requests to the completions endpoints, by the HTTP status they got "
            f"({CLIENT_CLOSED} = client left before a status was sent).",
            [(f'{{status="{s}"}}', n) for s, n in sorted(metrics.requests_by_status.items())],
        ),
        _family(
            "loadtest_mock_faults_total",
            "counter",
            "Injected faults, by kind (fail, rate_limit, drop, malformed, stall, hang, broken_json).",
            [(f'{{kind="{k}"}}', n) for k, n in sorted(metrics.faults.items())],
        ),
        _family(
            "loadtest_mock_outcomes_total",
            "counter",
            "How each request to the completions endpoints ended, one outcome per request: "
            "ok, malformed (a corrupt chunk was sent), dropped (cut on purpose), "
            "client_left (the client closed first), shutdown, http_500, http_429, http_4xx. "
            "A request still in flight has none yet.",
            [(f'{{outcome="{k}"}}', n) for k, n in sorted(metrics.outcomes.items())],
        ),
        _family(
            "loadtest_mock_steps_total",
            "counter",
            "Engine decode steps run.",
            [("", engine.steps_total)],
        ),
        _family(
            "loadtest_mock_step_late_seconds_total",
            "counter",
            "Sum over steps of how late each step's tokens were sent after its deadline.",
            [("", engine.late_s_total)],
        ),
        _family(
            "loadtest_mock_step_late_seconds_max",
            "gauge",
            "The latest any step's tokens were sent after its deadline (overload shows here).",
            [("", engine.late_s_max)],
        ),
        _family(
            "loadtest_mock_step_emit_seconds_total",
            "counter",
            "Sum over steps of the time spent handing out the step's tokens (socket writes).",
            [("", engine.emit_s_total)],
        ),
        _family(
            "loadtest_mock_step_emit_seconds_max",
            "gauge",
            "The longest time any step spent handing out its tokens.",
            [("", engine.emit_s_max)],
        ),
        _family(
            "loadtest_mock_config",
            "gauge",
            "The engine model's parameters (MODEL.md).",
            [
                ('{param="max_batch"}', config.max_batch),
                ('{param="decode_base_ms"}', config.decode_base_ms),
                ('{param="decode_per_seq_ms"}', config.decode_per_seq_ms),
                ('{param="prefill_per_token_ms"}', config.prefill_per_token_ms),
                ('{param="tokens_per_chunk"}', config.tokens_per_chunk),
                *(
                    [(f'{{param="{name}"}}', getattr(config, name)) for name in _ROOFLINE_PARAMS]
                    if config.roofline_hbm_gbps is not None
                    else []
                ),
                ('{param="drift_slowdown"}', engine.slowdown),  # this start's draw (--drift)
            ],
        ),
    ]
    return ("\n".join(families) + "\n").encode()


_ROOFLINE_PARAMS = (
    "roofline_hbm_gbps", "roofline_tflops", "roofline_params_b", "roofline_bytes_per_weight",
    "roofline_kv_bytes_per_token", "roofline_overhead_ms",
)


def parse_prometheus_text(text: str) -> dict[str, float]:
    """Samples of a Prometheus text exposition, keyed by the series as written.

    ``'vllm:num_requests_running{model_name="mock-model"} 3.0'`` becomes
    ``{'vllm:num_requests_running{model_name="mock-model"}': 3.0}``. Comment
    lines are skipped; an optional trailing timestamp is dropped.
    """
    samples: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        # The series may contain spaces inside label values, so split on the
        # last '}' when there are labels, else on the first space.
        if "}" in line:
            cut = line.rindex("}") + 1
            series, rest = line[:cut], line[cut:].split()
        else:
            series, *rest = line.split()
        if rest:
            samples[series] = float(rest[0])
    return samples
