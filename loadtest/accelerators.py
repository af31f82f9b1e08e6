"""Accelerators' memory bandwidth and dense tensor throughput: the roofline's ceilings.

Why a table: the floors a measured step is compared with (weight bytes over
bandwidth, FLOPs over throughput) are only as good as these numbers, so each
one names its source and when it was read. Figures are per GPU, **dense**
(vendor datasheets often print 2:4-sparse figures, twice as high; those are
halved here, and the comment says so). FP8 is None where the chip has no FP8
tensor cores. Read 2026-12-01 from the datasheets named in each comment.

A scenario may name one (``hardware: {accelerator: H100-SXM, count: 2}``) or
give ``hbm_gbps`` / ``tflops`` itself for anything not listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from loadtest.errors import InputError


@dataclass(frozen=True)
class Accelerator:
    name: str
    #: Memory bandwidth, GB/s (10^9 bytes per second).
    hbm_gbps: float
    #: Dense FP16/BF16 tensor throughput, TFLOP/s.
    fp16_tflops: float
    #: Dense FP8 tensor throughput, TFLOP/s; None without FP8 tensor cores.
    fp8_tflops: float | None
    memory_gb: float
    source: str

    def tflops(self, precision: str) -> float:
        """Throughput for a served precision (``fp16``, ``bf16``, ``fp8``; others use FP16's)."""
        if precision == "fp8":
            if self.fp8_tflops is None:
                raise InputError(f"hardware.precision: {self.name} has no FP8 tensor cores")
            return self.fp8_tflops
        return self.fp16_tflops


ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100/), SXM5 80 GB:
        # 3.35 TB/s HBM3; BF16/FP16 1,979 and FP8 3,958 TFLOPS "with sparsity" -> 989.5 / 1,979 dense.
        Accelerator("H100-SXM", 3350, 989.5, 1979, 80, "NVIDIA H100 datasheet, SXM5"),
        # Same datasheet, H100 PCIe 80 GB: 2.0 TB/s HBM2e; 1,513 / 3,026 sparse -> 756.5 / 1,513 dense.
        Accelerator("H100-PCIe", 2000, 756.5, 1513, 80, "NVIDIA H100 datasheet, PCIe"),
        # Same datasheet, H100 NVL 94 GB: 3.9 TB/s; 1,671 / 3,341 sparse -> 835.5 / 1,670.5 dense.
        Accelerator("H100-NVL", 3900, 835.5, 1670.5, 94, "NVIDIA H100 datasheet, NVL"),
        # NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200/), SXM 141 GB HBM3e: 4.8 TB/s;
        # same Hopper tensor cores as H100 SXM: 1,979 / 3,958 sparse -> 989.5 / 1,979 dense.
        Accelerator("H200", 4800, 989.5, 1979, 141, "NVIDIA H200 datasheet, SXM"),
        # NVIDIA HGX B200 datasheet (nvidia.com/en-us/data-center/hgx/), per GPU: 180 GB HBM3e at
        # 7.7 TB/s; FP16/BF16 4.5 PF and FP8 9 PF "with sparsity" -> 2,250 / 4,500 dense.
        Accelerator("B200", 7700, 2250, 4500, 180, "NVIDIA HGX B200 datasheet, per GPU"),
        # NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100/): 40 GB HBM2 1,555 GB/s,
        # 80 GB SXM HBM2e 2,039 GB/s; BF16/FP16 tensor 312 dense (624 sparse); no FP8.
        Accelerator("A100-40GB", 1555, 312, None, 40, "NVIDIA A100 datasheet, 40 GB SXM"),
        Accelerator("A100-80GB", 2039, 312, None, 80, "NVIDIA A100 datasheet, 80 GB SXM"),
        # NVIDIA L40S datasheet: 48 GB GDDR6 864 GB/s; BF16/FP16 tensor 362.05 dense (733 sparse),
        # FP8 733 dense (1,466 sparse).
        Accelerator("L40S", 864, 362.05, 733, 48, "NVIDIA L40S datasheet"),
        # NVIDIA L4 datasheet: 24 GB GDDR6 300 GB/s; FP16 242 and FP8 485 TFLOPS "with sparsity"
        # -> 121 / 242.5 dense.
        Accelerator("L4", 300, 121, 242.5, 24, "NVIDIA L4 datasheet"),
        # A10G (AWS G5) has no NVIDIA datasheet; 24 GB GDDR6 600 GB/s as the A10's, FP16 tensor
        # ~70 TFLOPS dense (AWS/Baseten "A10 vs A10G", 2023; the A10 datasheet's 125 is the A10's).
        Accelerator("A10G", 600, 70, None, 24, "AWS G5 / Baseten A10 vs A10G comparison"),
        # NVIDIA A10 datasheet: 24 GB GDDR6 600 GB/s; FP16 tensor 125 dense (250 sparse).
        Accelerator("A10", 600, 125, None, 24, "NVIDIA A10 datasheet"),
        # AMD Instinct MI300X data sheet (amd.com): 192 GB HBM3 5.3 TB/s; FP16/BF16 1,307.4 dense
        # (2,614.9 sparse), FP8 2,614.9 dense (5,229.8 sparse).
        Accelerator("MI300X", 5300, 1307.4, 2614.9, 192, "AMD Instinct MI300X data sheet"),
        # AMD Instinct MI325X data sheet: 256 GB HBM3E 6 TB/s; same compute as MI300X.
        Accelerator("MI325X", 6000, 1307.4, 2614.9, 256, "AMD Instinct MI325X data sheet"),
    )
}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BY_KEY = {_key(name): acc for name, acc in ACCELERATORS.items()}
# Common spellings: "H100" alone is the SXM part (the one clouds rent most).
_BY_KEY.update({"h100": ACCELERATORS["H100-SXM"], "a100": ACCELERATORS["A100-80GB"], "h200sxm": ACCELERATORS["H200"]})


def find_accelerator(name: str) -> Accelerator:
    """The table entry for ``name`` (case, spaces and dashes ignored); InputError naming the choices."""
    found = _BY_KEY.get(_key(name))
    if found is None:
        raise InputError(f"hardware.accelerator: unknown '{name}' (known: {', '.join(ACCELERATORS)}; or give hbm_gbps and tflops)")
    return found
