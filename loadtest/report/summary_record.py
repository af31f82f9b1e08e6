"""The summary record: the one definition of ``summary.json``'s keys.

``summary.json`` is what CI reads: the capacity, every level's figures, the
server view, the autoscaling thresholds, the cost. It is built from the
analysis's typed results by :mod:`loadtest.report.summary`; this module says
which keys it has and of what kind, once. Writing checks the built summary
against :class:`SummaryRecord` (``extra="forbid"``): a key written under a new
name, a key dropped, or a list where a number belongs fails the test suite,
not a user's CI job a month later. The summary is written as built (the model
validates, it does not rewrite values), so ``0`` stays ``0`` and no figure
changes on the way out.

The blocks whose keys are data (metric names, class names, signals) or that
have their own definitions elsewhere (``client``, ``decision`` from
:mod:`loadtest.run_record`; ``cost``, ``autoscaling``) are typed as mappings
here. The per-level latency blocks are one field per metric of the registry
(:mod:`loadtest.metric_registry`), so a new metric adds its key here by itself.
The reference for users is ``docs/run-folder.md``; a test checks that every key
of a real summary is listed there.

Only pydantic and the registry are imported, so any layer may use it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, create_model

from loadtest.metric_registry import LATENCY_METRICS

#: The metrics whose per-level percentile block is a key of each level (``levels[].ttft_ms`` …).
LATENCY_KEYS: tuple[str, ...] = LATENCY_METRICS

Number = Union[int, float]


class _Strict(BaseModel):
    """Every key declared: an unknown one is refused."""

    model_config = ConfigDict(extra="forbid")


class CapacityRecord(_Strict):
    """``capacity``: the answer, its binding check, and how certain it is."""

    concurrency: Optional[int]
    verdict: str
    message: str
    first_failing: Optional[int]
    binding: Optional[str]
    binding_value: Optional[Number]
    binding_unbounded: bool
    binding_limit: Optional[Number]
    binding_ratio: Optional[Number]
    requests_per_s: Optional[Number]
    output_tokens_per_s: Optional[Number]
    goodput_rps: Optional[Number]
    certain_concurrency: Optional[int]
    upper_bound: Optional[int]
    max_tested: Optional[int]
    uncertain_levels: list[int]
    saturated_levels: list[int]
    contended_levels: list[int]
    #: open loop (null in closed loop, where concurrency answers)
    rate_rps: Optional[Number]
    first_failing_rate_rps: Optional[Number]
    upper_bound_rate_rps: Optional[Number]
    max_tested_rate_rps: Optional[Number]
    mean_in_flight: Optional[Number]
    binding_class: Optional[str]
    #: embeddings' throughput at the capacity: prompt tokens and inputs per second
    input_tokens_per_s: Optional[Number]
    items_per_s: Optional[Number]
    #: the model (or LoRA adapter) the binding class sent to
    binding_model: Optional[str]
    #: trace replay (null otherwise): the capacity as a speedup of the trace window
    speedup: Optional[Number]
    first_failing_speedup: Optional[Number]
    upper_bound_speedup: Optional[Number]
    max_tested_speedup: Optional[Number]
    #: open loop: the rates the capacity level's measured window was offered and sent (added later)
    offered_rate_rps: Optional[Number] = None
    sent_rate_rps: Optional[Number] = None
    #: a fleet: the capacity divided by target.replicas (users, or requests/s, per replica); top level only
    per_replica: Optional[Number] = None
    #: each request class's own capacity (only with ``workload.classes``)
    classes: Optional[dict[str, "CapacityRecord"]] = None


_LevelBase = create_model(  # type: ignore[call-overload]
    "_LevelBase",
    __base__=_Strict,
    **{key: (Optional[dict[str, Any]], None) for key in LATENCY_KEYS},
)


class LevelRecord(_LevelBase):  # type: ignore[misc,valid-type]
    """``levels[]`` (and ``levels[].classes.<class>``, which has the same keys but ``server`` and ``bound``)."""

    concurrency: int
    index: int
    refine: bool
    status: str
    passed: Optional[bool]
    client_saturated: bool
    #: (added later: summaries written before it say nothing, read as False)
    client_near_limit: bool = False
    host_contended: bool
    client: Optional[dict[str, Any]]
    decision: Optional[dict[str, Any]]
    window: dict[str, Any]
    requests: int
    errors: int
    error_rate: Optional[Number]
    error_rate_ci: list[Optional[Number]]
    errors_by_kind: dict[str, int]
    completed: int
    complete: int
    spillover: int
    cancelled: int
    requests_per_s: Optional[Number]
    output_tokens_per_s: Optional[Number]
    goodput_rps: Optional[Number]
    checks: list[dict[str, Any]]
    rate_rps: Optional[Number]
    open_loop: Optional[dict[str, Any]]
    #: tools / response_format: the share of valid outputs among the checked successes, and how many
    valid_output_rate: Optional[Number]
    valid_output_checked: int
    #: its Wilson interval at the run's confidence (null when nothing was checked)
    valid_output_rate_ci: Optional[list[Optional[Number]]] = None
    #: the input side (embeddings): prompt tokens and inputs of the requests that ended ok, per second
    input_tokens_per_s: Optional[Number]
    items_per_s: Optional[Number]
    #: trace replay: the level's speedup of the trace window (null otherwise)
    speedup: Optional[Number]
    #: the level's prefix-cache hit rate and where it came from (server counters or the responses)
    prefix_cache: Optional[dict[str, Any]]
    #: workload.images: images, bytes and prompt tokens per request, TTFT by image count
    images: Optional[dict[str, Any]] = None
    ttft_by_turn: Optional[dict[str, Any]] = None
    classes: Optional[dict[str, "LevelRecord"]] = None
    #: the server's signals over the level (empty when not scraped); not in a class's block
    server: Optional[dict[str, Any]] = None
    #: memory | compute | overhead from the roofline (with hardware: and model:); not in a class's block
    bound: Optional[Any] = None
    #: a fleet: the busiest replica's running requests over the mean (null with one); not in a class's block
    imbalance: Optional[Number] = None
    #: a fleet: the replicas whose every scrape failed in the window ([] none; null with one server)
    silent_replicas: Optional[list[str]] = None
    #: a fleet: how many replicas carried the level, where the others' gauges show fewer than listed did
    replicas_serving: Optional[int] = None


class SummaryRecord(_Strict):
    """``summary.json``: every top-level key."""

    format: int
    name: str
    generated_at: str
    tool_version: str
    target: dict[str, Any]
    slo: dict[str, Any]
    capacity: CapacityRecord
    levels: list[LevelRecord]
    decode_fit: Optional[dict[str, Any]]
    cost: Optional[dict[str, Any]]
    token_source: dict[str, Any]
    itl_unit: Optional[str]
    confidence: Number
    server_metrics: dict[str, Any]
    autoscaling: Optional[dict[str, Any]]
    prompt_token_source: dict[str, Any]
    classes: dict[str, Any]
    datasets: list[Any]
    warnings: list[str]
    run: dict[str, Any]
    definitions: dict[str, Any]
    fingerprint: Optional[dict[str, Any]]
    #: why the capacity stops where it does (analysis/capacity_limit.py); added after format 1's first keys
    capacity_limit: Optional[dict[str, Any]] = None
    #: the target stopped answering during the run (analysis/target_lost.py); null when it answered to the end
    target_lost: Optional[dict[str, Any]] = None
    #: the prompt length asked for against the server's count (analysis/prompt_length.py); null for older runs
    prompt_tokens: Optional[dict[str, Any]] = None


def check_summary(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """``summary`` itself, once it is known to match :class:`SummaryRecord` (pydantic's error otherwise)."""
    SummaryRecord.model_validate(dict(summary))
    return summary
