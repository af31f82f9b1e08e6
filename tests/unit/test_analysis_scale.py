"""The analyzer handles a big run (100k requests × 100 chunks = 10M chunk timestamps).

Only completion and sanity are asserted here; timing belongs to the benchmarks.
"""

from __future__ import annotations

from loadtest.analysis import SloSpec, analyze
from support.synthetic import bulk_requests, level_plan, run_dict


def test_itl_over_100k_requests_with_100_chunks_completes():
    levels = level_plan([1, 2, 4, 8, 16, 32, 64, 128], 60.0)
    frame = bulk_requests(100_000, 100, levels, itl_ms=20.0)
    slo = SloSpec.from_dict({"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 80}, "max_error_rate": 0.01})
    analysis = analyze(frame, run_dict(levels, warmup_s=5.0), slo)
    total_itl = sum(lv.itl_ms.n for lv in analysis.levels)
    assert 8_000_000 < total_itl < 9_900_000  # 99 gaps per request, minus those arriving in warmup
    for level in analysis.levels:
        # exponential gaps with mean 20 ms: p95 = 20·ln(20) ≈ 59.9 ms
        assert 57 < level.itl_ms.p95 < 63
        assert level.itl_ms.ci["p95"][0] <= level.itl_ms.p95 <= level.itl_ms.ci["p95"][1]
    assert analysis.capacity.verdict == "at_least"
