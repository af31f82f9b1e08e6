"""The decode and prefill fits and the roofline reading, on synthetic data with known answers."""

from __future__ import annotations

import math
import random

import pytest

from loadtest.analysis.decode_fit import DecodePoint, describe_decode, fit_decode, knee_bracket, probes_between
from loadtest.accelerators import ACCELERATORS, find_accelerator
from loadtest.analysis.prefill_fit import describe_prefill, fit_prefill
from loadtest.analysis.roofline import Ceilings, ModelSize, read_decode, read_prefill
from loadtest.errors import InputError


def _points(step, ns, noise=0.0, seed=1):
    rng = random.Random(seed)
    return [DecodePoint(n, step(n) * (1 + rng.uniform(-noise, noise))) for n in ns]


def test_two_segments_are_recovered_with_the_knee_where_the_lines_cross():
    # 21 ms step + 0.4 ms per sequence, then 6 ms per sequence through the origin: knee 21/5.6 = 3.75.
    # Scaled to the example: fixed 21, per-seq 0.4, compute 1.8 -> knee 15.
    step = lambda n: max(21 + 0.4 * n, 1.8 * n)  # noqa: E731
    fit = fit_decode(_points(step, [1, 2, 4, 8, 12, 14, 16, 20, 24, 32]))
    assert fit is not None and fit.knee_sequences is not None
    assert fit.fixed_ms == pytest.approx(21, rel=0.01)
    assert fit.per_seq_ms == pytest.approx(0.4, rel=0.01)
    assert fit.compute_ms_per_seq == pytest.approx(1.8, rel=0.01)
    assert fit.knee_sequences == pytest.approx(15, abs=0.1)
    assert fit.side(8) == "flat" and fit.side(24) == "steep"
    assert "up to about 15 sequences" in describe_decode(fit)


def test_noisy_points_still_give_the_knee_within_one_sequence():
    step = lambda n: 0.5 + max(16 + 0.38 * n, 1.0 * n)  # noqa: E731  (the roofline mock's shape)
    truth = 16 / (1.0 - 0.38)
    fit = fit_decode(_points(step, [1, 2, 4, 8, 16, 20, 24, 28, 32, 40], noise=0.01))
    assert abs(fit.knee_sequences - truth) < 1
    assert fit.per_seq_ms == pytest.approx(0.38, rel=0.3)  # 1% noise on 17 ms is 0.17 ms: slopes wobble


def test_a_straight_line_has_no_knee():
    fit = fit_decode(_points(lambda n: 30 + 0.1 * n, [1, 2, 4, 8, 16, 32], noise=0.002))
    assert fit.knee_sequences is None
    assert fit.fixed_ms == pytest.approx(30, rel=0.02)
    assert math.isnan(fit.compute_ms_per_seq)
    assert "no knee seen" in describe_decode(fit)


def test_a_flat_curve_a_hair_below_zero_reads_zero():
    """A slot-limited run's levels all run the same batch: the slope comes out -0.004 ms, said as 0.00."""
    fit = fit_decode(_points(lambda n: 20.0 - 0.004 * n, [1, 2, 4], noise=0.0))
    assert fit.per_seq_ms < 0
    assert "adds 0.00 ms" in describe_decode(fit) and "-0.00" not in describe_decode(fit)


def test_one_point_past_the_knee_uses_the_line_through_the_origin():
    step = lambda n: max(20 + 0.5 * n, 2.5 * n)  # noqa: E731  knee 10
    fit = fit_decode(_points(step, [1, 2, 4, 8, 16]))
    assert fit.compute_ms_per_seq == pytest.approx(2.5)
    assert fit.knee_sequences == pytest.approx(10)
    assert knee_bracket(fit) == (8, 16)
    assert probes_between(8, 16) == [10, 12, 14]
    assert probes_between(10, 12) == [11]
    assert probes_between(10, 11) == []


def test_too_few_points_give_no_fit():
    assert fit_decode([DecodePoint(4, 10.0)]) is None
    assert fit_decode([DecodePoint(4, 10.0), DecodePoint(4, 11.0)]) is None
    assert fit_decode([DecodePoint(1, math.nan), DecodePoint(2, 5.0)]) is None


def test_prefill_fit_recovers_fixed_and_per_token_with_intervals():
    rng = random.Random(3)
    lengths = [128, 256, 512, 1024] * 5
    ttft = [12 + 0.25 * L + rng.gauss(0, 1) for L in lengths]
    fit = fit_prefill(lengths, ttft)
    assert fit.ms_per_token == pytest.approx(0.25, rel=0.02)
    assert fit.fixed_ms == pytest.approx(12, abs=2)
    lo, hi = fit.ms_per_token_ci
    assert lo < 0.25 < hi
    assert fit.tokens_per_s == pytest.approx(4000, rel=0.02)
    assert not fit.quadratic_matters
    assert [p["prompt_tokens"] for p in fit.points] == [128, 256, 512, 1024]


def test_the_prefill_example_is_a_prompt_the_server_took():
    """A llama-server with 1,024 tokens of context per slot (prompts capped at 958) was told what a
    1,000-token prompt would wait: the example is now the longest measured prompt when that is shorter."""
    lengths = [64, 128, 256, 512, 958] * 3
    text = describe_prefill(fit_prefill(lengths, [10 + 0.35 * L for L in lengths]))
    assert "a 958-token prompt (the longest measured) waits about 345 ms" in text, text
    longer = [128, 256, 512, 1024] * 3
    assert "a 1,000-token prompt waits about 360 ms" in describe_prefill(fit_prefill(longer, [10 + 0.35 * L for L in longer]))


def test_prefill_quadratic_term_is_reported_when_it_matters():
    lengths = [128, 256, 512, 1024, 2048, 4096]
    fit = fit_prefill(lengths, [5 + 0.1 * L + 2e-5 * L * L for L in lengths])
    assert fit.quadratic_matters
    assert fit.quadratic_ms_per_token2 == pytest.approx(2e-5, rel=0.01)


def test_a_flat_prefill_line_says_so_instead_of_nan_tokens_per_s():
    """A server whose TTFT does not grow with the prompt (a mock with no prefill cost) read
    "-0.000 ms per prompt token (nan tokens/s)"."""
    rng = random.Random(3)
    lengths = [64, 256, 1024] * 20
    fit = fit_prefill(lengths, [20.0 + rng.gauss(0, 0.5) for _ in lengths])
    text = describe_prefill(fit)
    assert "too cheap to measure" in text and "nan" not in text and "tokens/s" not in text
    sloped = fit_prefill(lengths, [20.0 + 0.05 * n for n in lengths])
    assert "too cheap" not in describe_prefill(sloped) and "20,000 tokens/s" in describe_prefill(sloped)


def test_a_flat_prefill_line_gets_no_rate_and_no_roofline_in_profile_json(tmp_path):
    """With the slope's interval reaching zero the sentence says "too cheap to measure"; the
    roofline reading once added "(compute-bound, …% of the compute floor)" to it, and
    profile.json's tokens_per_s read 1000 / slope (millions of tokens/s for a slope near zero)."""
    from types import SimpleNamespace

    from loadtest.profile.output import profile_dict
    from loadtest.profile.runner import ProfileData

    rng = random.Random(3)
    lengths = [64, 256, 1024] * 20
    scenario = SimpleNamespace(name="p", target=SimpleNamespace(base_url="http://127.0.0.1:1/v1", model="m", api="chat"))
    ceil = Ceilings(bandwidth_bps=1000e9, flops=16e12)
    model = ModelSize(params=8e9, bytes_per_weight=2, kv_bytes_per_token=4e6)
    flat = fit_prefill(lengths, [20.0 + 0.00005 * n + rng.gauss(0, 0.5) for n in lengths])
    assert not flat.measurable
    out = profile_dict(ProfileData(scenario=scenario, folder=tmp_path, server_facts={}, prefill=flat), ceil, model)
    assert out["prefill"]["measurable"] is False
    assert out["prefill"]["tokens_per_s"] is None and out["prefill"]["bound"] is None
    assert out["prefill"]["roofline"] is None
    assert all("bound" not in s and "too cheap to measure" in s for s in out["summary"] if "prefill" in s)
    sloped = fit_prefill(lengths, [20.0 + 0.05 * n for n in lengths])
    out = profile_dict(ProfileData(scenario=scenario, folder=tmp_path, server_facts={}, prefill=sloped), ceil, model)
    assert out["prefill"]["measurable"] is True and out["prefill"]["tokens_per_s"] == pytest.approx(20000, rel=1e-3)
    assert out["prefill"]["bound"] is not None


def test_prefill_needs_two_lengths():
    assert fit_prefill([128, 128], [10.0, 11.0]) is None


def test_roofline_names_memory_compute_and_overhead():
    ceil = Ceilings(bandwidth_bps=1000e9, flops=16e12)
    model = ModelSize(params=8e9, bytes_per_weight=2, kv_bytes_per_token=4e6)
    # floors at 4 sequences of 96 tokens: memory 16 + 1.536 ms, compute 4 ms
    memory = read_decode(ceil, model, 18.0, 4, 96)
    assert memory.bound == "memory"
    assert memory.memory_floor_ms == pytest.approx(17.536)
    assert memory.efficiency == pytest.approx(17.536 / 18)
    assert memory.achieved_gbps == pytest.approx((16e9 + 4 * 96 * 4e6) / 0.018 / 1e9)
    assert read_decode(ceil, model, 33.0, 32, 96).bound == "compute"  # compute floor 32 ms
    assert read_decode(ceil, model, 60.0, 4, 96).bound == "overhead"  # > 3 × 17.5 ms
    assert read_prefill(ceil, model, 1.05).bound == "compute"
    assert read_prefill(ceil, model, 5.0).bound == "overhead"
    assert read_decode(ceil, model, math.nan, 4, 96) is None


def test_hardware_table_is_dense_and_looked_up_loosely():
    h100 = find_accelerator("h100 sxm")
    assert (h100.hbm_gbps, h100.fp16_tflops, h100.fp8_tflops) == (3350, 989.5, 1979)
    assert find_accelerator("MI300X").fp16_tflops == 1307.4
    for acc in ACCELERATORS.values():
        assert acc.hbm_gbps > 0 and acc.fp16_tflops > 0 and acc.source
        assert acc.fp8_tflops is None or acc.fp8_tflops >= acc.fp16_tflops
    with pytest.raises(InputError, match="hardware.accelerator: unknown 'X9'"):
        find_accelerator("X9")
    with pytest.raises(InputError, match="no FP8"):
        find_accelerator("A100-80GB").tflops("fp8")


def test_a_flat_curve_gets_no_knee_at_its_last_point():
    # an overhead-bound server: 26 ms whatever the batch, sub-percent jitter
    points = [DecodePoint(1, 25.9975), DecodePoint(2, 26.0005), DecodePoint(4, 26.0067), DecodePoint(8, 26.0053)]
    fit = fit_decode(points)
    assert fit.knee_sequences is None
    assert fit.per_seq_ms == pytest.approx(0.0, abs=0.01)


def test_the_sentence_never_calls_a_flat_stretch_compute_bound(monkeypatch):
    """A profile's sub-run printed "decode is compute-bound up to about 13 sequences (each extra sequence
    adds 1.35 ms …); past that … compute-bound; at capacity the step is memory-bound": the declared
    ceilings' word where the measured curve is flat. Below a measured knee the shape's words are used."""
    from types import SimpleNamespace

    from loadtest.report import why as why_module

    step = lambda n: max(21 + 0.4 * n, 1.8 * n)  # noqa: E731
    fit = fit_decode(_points(step, [1, 2, 4, 8, 12, 14, 16, 20, 24, 32]))

    def bounds(words):
        return {i: SimpleNamespace(bound=b, sequences=n, concurrency=n, to_dict=lambda: {})
                for i, (n, b) in enumerate(words)}

    analysis = SimpleNamespace(run={}, capacity=SimpleNamespace(concurrency=8), levels=[])
    monkeypatch.setattr(why_module, "fit_run", lambda a: fit)
    monkeypatch.setattr(why_module, "resolve_run", lambda run: (object(), object()))  # ceilings and a model
    every_compute = [(8, "compute"), (12, "compute"), (24, "compute")]
    monkeypatch.setattr(why_module, "level_bounds", lambda *a: bounds(every_compute))
    sentence = why_module.why(analysis)[0]["sentence"]
    assert sentence.startswith("decode is nearly free up to about 15") and sentence.endswith("compute-bound"), sentence
    agreeing = [(8, "memory"), (12, "memory"), (24, "compute")]
    monkeypatch.setattr(why_module, "level_bounds", lambda *a: bounds(agreeing))
    assert why_module.why(analysis)[0]["sentence"].startswith("decode is memory-bound up to about 15")
