"""The server-side signals this tool knows, by the names each server exports.

A signal has a *role* (what it means for capacity) and an *aggregate* (how
several series of one metric in one scrape combine: counts of requests add
up across engines or models; a cache fill fraction takes the fullest one).

Sources, looked up in each server's own source or docs (names change across versions):

* vLLM: ``docs/source/design/v1/metrics.md`` (vllm-project/vllm) lists the v0 gauges
  ``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:num_requests_swapped``
  and ``vllm:gpu_cache_usage_perc``; the V1 engine (``vllm/v1/metrics/loggers.py``) exports
  the KV cache as ``vllm:kv_cache_usage_perc`` and the old name only as a deprecated,
  hidden metric, and has no swapping.
* SGLang: ``docs/references/production_metrics.md`` and ``python/sglang/srt/metrics/collector.py``
  (sgl-project/sglang): ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``,
  ``sglang:token_usage`` (fraction of the KV token pool in use).
* TGI: the metrics reference of huggingface/text-generation-inference
  (``docs/source/reference/metrics.md``, router ``src/``): ``tgi_batch_current_size``,
  ``tgi_queue_size``, ``tgi_batch_current_max_tokens``.
* llama.cpp ``llama-server`` (``--metrics``): ``tools/server/README.md`` (ggml-org/llama.cpp):
  ``llamacpp:requests_processing``, ``llamacpp:requests_deferred``,
  ``llamacpp:kv_cache_usage_ratio`` and ``llamacpp:kv_cache_tokens`` (the KV gauges are gone
  from recent builds, which is why they are optional here like every other name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["running", "waiting", "kv_cache", "kv_tokens", "swapped", "batch_tokens", "custom"]
Aggregate = Literal["sum", "max"]

#: Which role makes the better autoscaling trigger when two separate capacity equally well.
ROLE_PRIORITY: tuple[str, ...] = ("running", "waiting", "kv_cache", "kv_tokens", "batch_tokens", "swapped", "custom")

ROLE_LABELS = {
    "running": "running requests",
    "waiting": "waiting requests",
    "kv_cache": "KV cache usage (fraction)",
    "kv_tokens": "KV cache tokens",
    "swapped": "swapped requests",
    "batch_tokens": "batch token budget",
    "custom": "scenario signal",
}


@dataclass(frozen=True)
class Signal:
    metric: str
    server: str
    role: str
    aggregate: Aggregate = "sum"
    note: str = ""

    @property
    def is_fraction(self) -> bool:
        return self.role == "kv_cache"


KNOWN_SIGNALS: tuple[Signal, ...] = (
    # vLLM
    Signal("vllm:num_requests_running", "vLLM", "running"),
    Signal("vllm:num_requests_waiting", "vLLM", "waiting"),
    Signal("vllm:kv_cache_usage_perc", "vLLM", "kv_cache", "max", "V1 engine name"),
    Signal("vllm:gpu_cache_usage_perc", "vLLM", "kv_cache", "max", "v0 name, deprecated in V1"),
    Signal("vllm:num_requests_swapped", "vLLM", "swapped", "sum", "v0 only"),
    # SGLang
    Signal("sglang:num_running_reqs", "SGLang", "running"),
    Signal("sglang:num_queue_reqs", "SGLang", "waiting"),
    Signal("sglang:token_usage", "SGLang", "kv_cache", "max"),
    # TGI
    Signal("tgi_batch_current_size", "TGI", "running"),
    Signal("tgi_queue_size", "TGI", "waiting"),
    Signal("tgi_batch_current_max_tokens", "TGI", "batch_tokens"),
    # llama.cpp llama-server
    Signal("llamacpp:requests_processing", "llama.cpp", "running"),
    Signal("llamacpp:requests_deferred", "llama.cpp", "waiting"),
    Signal("llamacpp:kv_cache_usage_ratio", "llama.cpp", "kv_cache", "max", "absent from recent builds"),
    Signal("llamacpp:kv_cache_tokens", "llama.cpp", "kv_tokens", "sum", "absent from recent builds"),
)

_BY_METRIC = {s.metric: s for s in KNOWN_SIGNALS}


def signal_for(metric: str) -> Signal:
    """The known signal of that name, or a scenario-named one (role ``custom``, summed)."""
    return _BY_METRIC.get(metric) or Signal(metric, "scenario", "custom")


def role_rank(role: str) -> int:
    return ROLE_PRIORITY.index(role) if role in ROLE_PRIORITY else len(ROLE_PRIORITY)
