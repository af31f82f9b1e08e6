"""The mock's roofline mode: step times that follow hardware limits, not fixed costs.

Why: ``loadtest profile`` claims to tell a memory-bound decode from a
compute-bound one and both from an overhead-bound one. That claim needs a
server whose truth is known. In this mode the mock declares an accelerator
(memory bandwidth, FLOPS) and a model (parameters, bytes per weight, KV bytes
per token), and each engine step lasts what those imply:

    step = overhead + max(memory floor, compute floor)
    memory floor  = (weight bytes + KV bytes of every running sequence's context) / bandwidth
    compute floor = 2 × params × (tokens computed in the step) / FLOPS

A decode step computes one token per running sequence; a step that admits
requests also computes their prompts (prefill), so a prompt of ``L`` tokens
costs ``2 × params × L / FLOPS`` of compute. Hence, for ``n`` sequences of
context ``c`` (see MODEL.md, "Roofline mode"):

- memory-bound side: ``step(n) = overhead + W/bw + n × kv × c / bw`` (extra sequences nearly free);
- compute-bound side: ``step(n) = overhead + n × 2P/F``;
- the knee where they meet: ``n* = (W/bw) / (2P/F − kv × c / bw)``;
- prefill of ``L`` tokens (when compute dominates): ``overhead + L × 2P/F``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Roofline:
    """Declared hardware and model; all rates in SI units (bytes/s, FLOP/s)."""

    bandwidth_bps: float
    flops: float
    params: float
    bytes_per_weight: float
    kv_bytes_per_token: float
    overhead_s: float

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_weight

    @property
    def weights_floor_s(self) -> float:
        """Reading every weight once: the least a decode step can take."""
        return self.weight_bytes / self.bandwidth_bps

    @property
    def compute_s_per_token(self) -> float:
        """2 FLOPs per parameter per token (a multiply and an add)."""
        return 2.0 * self.params / self.flops

    def kv_s_per_seq(self, context_tokens: float) -> float:
        """Reading one sequence's KV cache of ``context_tokens`` tokens."""
        return self.kv_bytes_per_token * context_tokens / self.bandwidth_bps

    def step_s(self, context_tokens: int, computed_tokens: int) -> float:
        """One step: ``context_tokens`` summed over the running sequences, ``computed_tokens`` = decode + prefill."""
        memory = (self.weight_bytes + self.kv_bytes_per_token * context_tokens) / self.bandwidth_bps
        compute = self.compute_s_per_token * computed_tokens
        return self.overhead_s + max(memory, compute)

    def knee(self, context_tokens: float) -> float:
        """Sequences at which the compute floor overtakes the memory floor (inf if never)."""
        slope = self.compute_s_per_token - self.kv_s_per_seq(context_tokens)
        return self.weights_floor_s / slope if slope > 0 else float("inf")


def from_config(config: object) -> Roofline | None:
    """The roofline of a :class:`~loadtest.mock.config.MockConfig`, or None when the mode is off."""
    gbps = getattr(config, "roofline_hbm_gbps", None)
    if gbps is None:
        return None
    return Roofline(
        bandwidth_bps=gbps * 1e9,
        flops=config.roofline_tflops * 1e12,  # type: ignore[attr-defined]
        params=config.roofline_params_b * 1e9,  # type: ignore[attr-defined]
        bytes_per_weight=config.roofline_bytes_per_weight,  # type: ignore[attr-defined]
        kv_bytes_per_token=config.roofline_kv_bytes_per_token,  # type: ignore[attr-defined]
        overhead_s=config.roofline_overhead_ms / 1000.0,  # type: ignore[attr-defined]
    )
