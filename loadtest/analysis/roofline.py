"""The roofline: the fastest a step could be on the declared hardware, and what bounds a measured one.

Why: a measured decode step says how fast the server is, not why. Against the
floors it can be read: a decode step cannot be faster than the bytes it must
read over the memory bandwidth (every weight once, plus each sequence's KV
cache), nor than its FLOPs over the tensor throughput (2 per parameter per
token computed). Whichever floor is higher is the bound; a step far above both
is bound by neither (scheduler, CPU, network: ``overhead``).

Pure arithmetic over :class:`Ceilings` (the hardware) and :class:`ModelSize`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from loadtest.accelerators import find_accelerator
from loadtest.analysis.decode_fit import DecodeFit

Bound = Literal["memory", "compute", "overhead"]

#: The bound read from the decode fit alone (no ``hardware:``/``model:``): below the knee extra
#: sequences are cheap, but without the floors a memory-bound step cannot be told from an
#: overhead-bound one, so the fit never claims ``memory`` on its own.
FIT_BELOW_KNEE = "memory_or_overhead"


def fit_bound(fit: DecodeFit, sequences: float) -> str:
    """The bound of a point from the decode fit alone: ``compute`` past the knee, and at every point of a
    curve whose step grows at least as fast as its batch (:attr:`DecodeFit.batching_pays`, the rule the
    fit's sentence says too); else ``memory_or_overhead``."""
    return "compute" if fit.side(sequences) == "steep" or not fit.batching_pays else FIT_BELOW_KNEE


def bound_words(bound: str, missing: str | None = None) -> str:
    """A bound in a sentence: 'memory-bound', or what the fit alone can say.

    ``missing``: what the roofline lacks to tell which (:func:`roofline_missing`); the hint named
    both sections even to a run that had declared them and lacked only the parameter count.
    """
    if bound == FIT_BELOW_KNEE:
        need = {"model.params_b": "declare model.params_b (the server does not tell its parameter count)",
                "hardware": "declare hardware: to tell which"}.get(missing or "", "declare hardware: and model: to tell which")
        return f"below the knee: memory- or overhead-bound ({need})"
    return f"{bound}-bound"


def roofline_missing(ceilings: Any, model: Any) -> str | None:
    """What the roofline lacks: ``"hardware"``, ``"model.params_b"``, or None when it has both."""
    if ceilings is None:
        return "hardware"
    return "model.params_b" if model is None else None

#: Measured more than this many times the higher floor (efficiency below 1/3) is ``overhead``.
#: Well-tuned decode reaches 60-90% of memory bandwidth; a third leaves room for honest
#: inefficiency before claiming the hardware is not what limits the step.
OVERHEAD_FACTOR = 3.0


@dataclass(frozen=True)
class Ceilings:
    """One replica's hardware: total bandwidth (bytes/s) and dense throughput (FLOP/s)."""

    bandwidth_bps: float
    flops: float
    label: str = ""


@dataclass(frozen=True)
class ModelSize:
    params: float
    bytes_per_weight: float
    kv_bytes_per_token: float = 0.0

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_weight


@dataclass(frozen=True)
class StepReading:
    """One measured step against its floors."""

    measured_ms: float
    memory_floor_ms: float
    compute_floor_ms: float
    bound: Bound
    #: Higher floor / measured (1 = at the roofline).
    efficiency: float
    achieved_gbps: float
    achieved_tflops: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured_ms": self.measured_ms,
            "memory_floor_ms": self.memory_floor_ms,
            "compute_floor_ms": self.compute_floor_ms,
            "bound": self.bound,
            "efficiency": self.efficiency,
            "achieved_gbps": self.achieved_gbps,
            "achieved_tflops": self.achieved_tflops,
        }


def read_step(
    ceilings: Ceilings, model: ModelSize, measured_ms: float, *, context_tokens: float, computed_tokens: float
) -> StepReading | None:
    """A step that read every weight plus ``context_tokens`` of KV and computed ``computed_tokens``."""
    if not (measured_ms > 0 and math.isfinite(measured_ms)):
        return None
    bytes_read = model.weight_bytes + model.kv_bytes_per_token * context_tokens
    flop = 2.0 * model.params * computed_tokens
    memory = bytes_read / ceilings.bandwidth_bps * 1000.0
    compute = flop / ceilings.flops * 1000.0
    floor = max(memory, compute)
    if measured_ms > OVERHEAD_FACTOR * floor:
        bound: Bound = "overhead"
    else:
        bound = "memory" if memory >= compute else "compute"
    seconds = measured_ms / 1000.0
    return StepReading(
        measured_ms=measured_ms,
        memory_floor_ms=memory,
        compute_floor_ms=compute,
        bound=bound,
        efficiency=floor / measured_ms,
        achieved_gbps=bytes_read / seconds / 1e9,
        achieved_tflops=flop / seconds / 1e12,
    )


def read_decode(ceilings: Ceilings, model: ModelSize, measured_ms: float, sequences: float, context_tokens: float) -> StepReading | None:
    """A decode step of ``sequences`` sequences, each of ``context_tokens`` context (one token each)."""
    return read_step(
        ceilings, model, measured_ms, context_tokens=sequences * context_tokens, computed_tokens=sequences
    )


def read_prefill(ceilings: Ceilings, model: ModelSize, ms_per_token: float) -> StepReading | None:
    """Prefill's marginal cost per prompt token against the compute floor of one token.

    Read per token (the fitted slope), so the fixed part of TTFT does not count
    against prefill; the memory floor of the weights is spread over the prompt
    and left out (it is what makes short prompts cost more than their tokens).
    """
    if not (ms_per_token > 0 and math.isfinite(ms_per_token)):
        return None
    compute = 2.0 * model.params / ceilings.flops * 1000.0
    bound: Bound = "overhead" if ms_per_token > OVERHEAD_FACTOR * compute else "compute"
    return StepReading(
        measured_ms=ms_per_token,
        memory_floor_ms=0.0,
        compute_floor_ms=compute,
        bound=bound,
        efficiency=compute / ms_per_token,
        achieved_gbps=math.nan,
        achieved_tflops=2.0 * model.params / (ms_per_token / 1000.0) / 1e12,
    )


def ceilings_of(hardware: Any) -> Ceilings | None:
    """:class:`Ceilings` of a scenario's ``hardware:`` (a :class:`loadtest.facts.Hardware`), or None."""
    if hardware is None:
        return None
    gbps, tflops, label = hardware.hbm_gbps, hardware.tflops, hardware.accelerator or "declared"
    if hardware.accelerator is not None:
        acc = find_accelerator(hardware.accelerator)
        gbps = gbps or acc.hbm_gbps
        tflops = tflops or acc.tflops(hardware.precision)
        label = acc.name
    if hardware.count > 1:
        label = f"{hardware.count} × {label}"
    return Ceilings(bandwidth_bps=gbps * 1e9 * hardware.count, flops=tflops * 1e12 * hardware.count, label=label)
