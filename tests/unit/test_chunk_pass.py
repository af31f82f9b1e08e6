"""The streaming chunk pass gives exactly what the whole-run chunk functions give, batch size whatever.

``analyze_run`` reads the chunk lists a batch at a time (loadtest/analysis/chunk_pass.py) instead
of flattening a whole run (loadtest/analysis/chunks.py).
The rules are per row, so both must agree to the last bit, also on the awkward records: tokens
that do not match their chunks, null and zero token counts, NaN arrivals, broken streams,
streams cut at a level's hold, fractional scaling to the server's count, request classes. Here
the whole-run functions are the reference, and batches of a few rows the test.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from loadtest.analysis import SloSpec, analyze, analyze_run
from loadtest.analysis.chunk_lists import arrow_source, frame_source
from loadtest.analysis.chunk_pass import chunk_pass
from loadtest.analysis.chunks import chunk_positions, flatten_chunks, group_by_position, itl_samples, tokens_per_window
from loadtest.analysis.frame import outcomes, send_e2e_ms
from loadtest.analysis.hold_cut import cut_at_hold_end, hold_cut_ms
from loadtest.analysis.intervals import bin_of, block_bootstrap_intervals, block_histogram, block_ids, block_index, block_length_s
from loadtest.quantiles import binned_order_statistics
from loadtest.analysis.columns import numeric
from loadtest.analysis.windows import level_windows
from loadtest import records_stream
from loadtest.records import RequestWriter, read_run_json, records_to_table, write_run_json
from loadtest.report.summary import summary_dict
from support.synthetic import T0, failed_row, level_plan, request_row, run_dict

SLO = {"ttft_ms": {"p95": 400}, "itl_ms": {"p95": 40}, "max_error_rate": 0.05}


def awkward_rows(n: int = 900, seed: int = 3) -> list[dict]:
    """Records over 3 levels of 10 s that hit every per-row rule of chunks.py (see module doc)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        level = i % 3
        start = T0 + 10.0 * level + rng.uniform(0, 9.9)  # the last ones spill into the next level
        k = int(rng.integers(0, 14))
        gaps = np.round(rng.exponential(15.0, k), 1)  # rounded: equal stamps and zero gaps occur
        chunk_ms = list(80.0 + np.cumsum(gaps))
        tokens: list | None = [int(t) for t in rng.choice([0, 1, 1, 1, 2, 3], k)]
        kind = i % 11
        if kind == 1 and k:
            tokens[0] = None  # a null count: one token
        elif kind == 2:
            tokens = tokens[:-1]  # does not match its chunks: one token each
        elif kind == 3:
            tokens = None
        elif kind == 4 and k > 2:
            chunk_ms[1] = float("nan")
        common = {"request_id": f"r{i}", "level": [2, 4, 8][level], "level_index": level, "start_wall": start,
                  "class": "chat" if i % 2 else "long"}
        if kind == 5:
            row = failed_row("timeout", e2e_ms=(chunk_ms[-1] + 500.0) if k else 900.0, chunk_ms=chunk_ms,
                             chunk_tokens=tokens, ttft_ms=chunk_ms[0] if k else None, **common)  # a broken stream
        elif kind == 6:
            row = failed_row("cancelled", e2e_ms=(chunk_ms[-1] + 1.0) if k else 50.0, chunk_ms=chunk_ms,
                             chunk_tokens=tokens, **common)
        else:
            reported = None if kind == 7 else (k + int(rng.integers(-1, 4)) if kind == 8 else k)  # scaled counts
            row = request_row(chunk_ms=chunk_ms, chunk_tokens=tokens, completion_tokens=reported, **common)
            if kind == 9 and level == 0:  # streams on past level 0's hold: cut there
                row["start_wall"] = T0 + 9.0 + rng.uniform(0, 1.0)
                row["chunk_ms"] = chunk_ms + list(chunk_ms[-1] + 40.0 * np.arange(1, 60) if k else [])
                row["chunk_tokens"] = None if tokens is None else tokens + [1] * (len(row["chunk_ms"]) - k)
                row["e2e_ms"] = row["chunk_ms"][-1] + 1.0 if row["chunk_ms"] else 3_000.0
        rows.append(row)
    return rows


def awkward_run() -> dict:
    plan = level_plan([2, 4, 8], 10.0)
    plan[0]["hold"] = {"start_wall": T0 + 10.0, "end_wall": T0 + 10.4, "held_s": 0.4, "ended": "cap", "censored": 3}
    return run_dict(plan, warmup_s=1.0, slo=SLO, name="awkward")


def small_batches(table: pa.Table, rows: int):
    return arrow_source(lambda: iter(table.to_batches(max_chunksize=rows)))


@pytest.mark.parametrize("batch_rows", [1, 7, 64, 10_000])
def test_the_pass_equals_the_whole_run_functions_bit_for_bit(batch_rows):
    rows, run = awkward_rows(), awkward_run()
    table = records_to_table(rows)
    requests = table.to_pandas()
    whole = cut_at_hold_end(requests, run)  # the reference cuts the lists in the frame
    cut_ms = hold_cut_ms(requests, run)
    assert cut_ms is not None and np.isfinite(cut_ms).sum() >= 5
    windows, _ = level_windows(run, whole)
    classes = whole["class"].to_numpy()
    for keep in (None, classes == "chat"):
        ref = whole if keep is None else whole.loc[keep].reset_index(drop=True)
        ok, _kinds, _cancelled, failed = outcomes(ref)
        start = numeric(ref, "start_wall")
        reported = numeric(ref, "completion_tokens")
        reported = np.where(ok & (reported > 0), reported, np.nan)
        send_e2e = send_e2e_ms(ref)

        chunks = flatten_chunks(ref)
        positions = chunk_positions(chunks, start, windows)
        itl, itl_pos, itl_at = itl_samples(chunks, positions, start, send_e2e, failed, windows)
        values = group_by_position(itl, itl_pos, len(windows))
        times = group_by_position(itl_at, itl_pos, len(windows))
        expected_tokens = tokens_per_window(chunks, positions, reported, len(windows))

        got = chunk_pass(small_batches(table, batch_rows), windows, start, send_e2e, failed, reported,
                         rows=keep, cut_ms=cut_ms)
        assert np.array_equal(got.counts, chunks.counts)
        assert np.array_equal(got.token_sums, chunks.token_sums)
        assert got.tokens_per_window.tobytes() == expected_tokens.tobytes()  # same rounding, not just close
        assert chunks.multi_token and np.isinf(itl).any()  # the awkward cases are really there
        for p, window in enumerate(windows):
            got_values, got_blocks = got.itl[p]
            assert got_values.tobytes() == values[p].tobytes()  # same samples in the same order
            blocks = block_ids(times[p], window.window_start, block_length_s(window.duration_s))
            assert np.array_equal(got_blocks, blocks)


def test_the_fractional_token_sums_are_added_in_the_same_order():
    """A scaled count makes the per-window sums fractional: only chunk-order addition matches the reference."""
    rows = awkward_rows(300, seed=5)
    for row in rows:
        if row["ok"] and row["chunk_ms"]:
            row["completion_tokens"] = len(row["chunk_ms"]) * 3 + 1  # never the chunk-token sum
    run = run_dict(level_plan([2, 4, 8], 10.0), slo=SLO)
    table = records_to_table(rows)
    requests = table.to_pandas()
    windows, _ = level_windows(run, requests)
    ok, _k, _c, failed = outcomes(requests)
    start, reported = numeric(requests, "start_wall"), numeric(requests, "completion_tokens")
    reported = np.where(ok & (reported > 0), reported, np.nan)
    chunks = flatten_chunks(requests)
    expected = tokens_per_window(chunks, chunk_positions(chunks, start, windows), reported, len(windows))
    got = chunk_pass(small_batches(table, 5), windows, start, send_e2e_ms(requests), failed, reported)
    assert (expected != np.floor(expected)).any()
    assert got.tokens_per_window.tobytes() == expected.tobytes()


def _summary(analysis) -> str:
    out = summary_dict(analysis)
    out.pop("generated_at")
    return json.dumps(out, sort_keys=True)


def test_a_run_on_disk_analyzes_as_the_same_records_in_memory(tmp_path, monkeypatch):
    """analyze_run streams requests.parquet in batches (here of 32 rows); analyze gets the whole frame."""
    monkeypatch.setattr(records_stream, "BATCH_CHUNKS", 200)
    monkeypatch.setattr(records_stream, "MIN_BATCH_ROWS", 32)
    rows, run = awkward_rows(), awkward_run()
    writer = RequestWriter(tmp_path)
    for part in range(3):
        writer.write(records_to_table(rows[part::3]))  # three part files, as a run flushes them
    parts = sorted((tmp_path / "requests.parts").glob("*.parquet"))
    write_run_json(tmp_path, run)
    killed = analyze_run(tmp_path)  # before the merge: the part files, as after a crash
    writer.close()
    assert len(list(records_stream.chunk_batches(tmp_path))) > 5  # really in batches
    merged = analyze_run(tmp_path)
    frame = records_to_table([r for part in range(3) for r in rows[part::3]]).to_pandas()
    slo = SloSpec.from_dict(SLO)
    in_memory = analyze(frame, read_run_json(tmp_path), slo)
    assert len(parts) == 3 and in_memory.levels[0].classes  # per-class levels too
    assert _summary(merged) == _summary(in_memory)
    assert _summary(killed) == _summary(in_memory)
    assert any(lv.cancelled for lv in merged.levels)  # the hold cut some


def test_frame_and_arrow_sources_yield_the_same_lists():
    table = records_to_table(awkward_rows(200))
    (whole,) = list(frame_source(table.to_pandas())())
    parts = list(small_batches(table, 9)())
    assert np.array_equal(np.concatenate([b.lengths for b in parts]), whole.lengths)
    assert np.array_equal(np.concatenate([b.arrival for b in parts]), whole.arrival, equal_nan=True)
    assert np.array_equal(np.concatenate([b.token_lengths for b in parts]), whole.token_lengths)
    assert np.array_equal(np.concatenate([b.tokens for b in parts]).astype(float), whole.tokens.astype(float),
                          equal_nan=True)


def test_bins_and_blocks_are_numpys_to_the_last_value():
    """bin_of and block_index replace searchsorted and unique in the intervals: same results, faster."""
    rng = np.random.default_rng(0)
    for values in (rng.exponential(20, 50_000), np.round(rng.lognormal(0, 3, 50_000), 2),
                   np.concatenate([np.zeros(10), -rng.exponential(1, 10), rng.exponential(1, 1000)]),
                   np.full(5000, 7.25)):
        positive = values[values > 0]
        edges = np.geomspace(positive.min(), max(values.max(), positive.min() * (1 + 1e-9)), 2048)
        probes = np.concatenate([values, edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)])
        assert np.array_equal(bin_of(probes, edges), np.searchsorted(edges, probes, side="left"))
    for blocks in (rng.integers(-1, 40, 10_000), np.array([5, 5, 5]), np.array([3, 10**9, -7])):
        count, inverse = block_index(blocks)
        keys, expected = np.unique(blocks, return_inverse=True)
        assert count == len(keys) and np.array_equal(inverse, expected.reshape(-1))


def test_percentiles_from_the_intervals_bins_are_the_exact_order_statistics():
    rng = np.random.default_rng(1)
    for values in (rng.exponential(20, 30_000), np.concatenate([np.round(rng.lognormal(2, 1, 30_000), 1),
                                                                 np.full(500, np.inf), np.zeros(40)])):
        rng.shuffle(values)
        histogram = block_histogram(values, rng.integers(0, 30, len(values)))
        ranks = np.array([0, 1, 15_000, 15_001, 28_500, 28_501, 29_700, len(values) - 1])
        got = binned_order_statistics(values, histogram.index, histogram.hist.sum(axis=0), ranks)
        assert np.array_equal(got, np.sort(values)[ranks])
    constant = np.full(10_000, 20.0)  # one bin holds everything: the partition is cheaper
    histogram = block_histogram(constant, np.zeros(10_000, dtype=np.int64))
    assert binned_order_statistics(constant, histogram.index, histogram.hist.sum(axis=0), np.array([9_500])) is None


def reference_intervals(values, blocks, qs, rng, resamples, confidence):
    """The block bootstrap as it was written before the shortcuts (searchsorted, unique, full cumsum)."""
    keys, block = np.unique(blocks, return_inverse=True)
    m = len(keys)
    finite = np.isfinite(values)
    fin = values[finite]
    positive = fin[fin > 0]
    lo_, hi_ = float(positive.min()), float(fin.max())
    edges = np.geomspace(lo_, max(hi_, lo_ * (1 + 1e-9)), 2048)
    index = np.where(finite, np.searchsorted(edges, np.where(finite, values, 0.0), side="left"), 2049)
    low, high = np.full(2050, np.inf), np.full(2050, -np.inf)
    np.minimum.at(low, index, values)
    np.maximum.at(high, index, values)
    low[2049] = high[2049] = np.inf
    hist = np.bincount(block.reshape(-1) * 2050 + index, minlength=m * 2050).reshape(m, 2050)
    weights = rng.multinomial(m, np.full(m, 1.0 / m), size=resamples).astype(float)
    cum = np.cumsum(weights @ hist, axis=1)
    out = {}
    for name, q in qs.items():
        k = np.floor(q * (cum[:, -1] - 1) + 1e-9) + 1
        at = np.minimum((cum < k[:, None]).sum(axis=1), 2049)
        out[name] = (float(np.quantile(low[at], (1 - confidence) / 2, method="lower")),
                     float(np.quantile(high[at], 1 - (1 - confidence) / 2, method="higher")))
    return out


def test_the_block_bootstrap_equals_its_straightforward_form():
    rng = np.random.default_rng(2)
    qs = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
    for seed in range(6):
        values = np.concatenate([rng.lognormal(1 + seed % 3, 1, 20_000), np.full(seed * 30, np.inf)])
        blocks = rng.integers(seed, 40, len(values))
        got = block_bootstrap_intervals(values, blocks, qs, np.random.default_rng(seed), resamples=300, confidence=0.95)
        want = reference_intervals(values, blocks, qs, np.random.default_rng(seed), 300, 0.95)
        assert got == want
