"""``loadtest compare`` reads the chunk lists a batch at a time and gets the bootstrap samples it got from the whole run.

The bootstrap's draws depend on the samples and on their order, so "the same" here is to the
byte: every array of every :class:`LevelSamples`, with its dtype, and the order of the levels;
and each run's replicates, now drawn one run after the other, give every interval that drawing
them with both runs' samples at hand gave.
The reference is the whole-run function as it was before (:func:`whole_run_level_samples`,
kept here only), on the records ``read_requests`` gives; the test is the package's, on the
scalar columns plus the chunk lists in batches of a few rows, from part files and from a
merged file. The records are ``test_chunk_pass``'s awkward ones (every per-row rule of
chunks.py, broken streams, a hold that cuts streams), over levels where one concurrency runs twice.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from loadtest import records_stream
from loadtest.analysis import SloSpec, analyze
from loadtest.analysis.chunk_lists import arrow_source
from loadtest.analysis.chunks import chunk_positions, flatten_chunks, itl_samples_with_rows
from loadtest.analysis.windows import level_windows
from loadtest.cli import main
from loadtest.analysis.bootstrap import rng_for
from loadtest.analysis.slo import PERCENTILES
from loadtest.compare import delta, engine
from loadtest.compare.itl_rows import dense_owners
from loadtest.compare.rules import ERROR_RATE, THROUGHPUT, Rules
from loadtest.compare.samples import SAMPLE_COLUMNS, Clustered, LevelSamples, level_samples
from loadtest.records import PARTS_DIR, REQUESTS_PARQUET, RequestWriter, read_requests, read_run_json, records_to_table, write_run_json
from tests.unit.test_chunk_pass import SLO, awkward_rows, awkward_run


def whole_run_level_samples(requests: pd.DataFrame, run: dict, frame: pd.DataFrame) -> dict[int, LevelSamples]:
    """``compare/samples.level_samples`` before it streamed (cbc7eec and earlier): every chunk flattened at once."""
    windows, _ = level_windows(run, requests)
    chunks = flatten_chunks(requests)
    start = frame["start_wall"].to_numpy(dtype=float)
    positions = chunk_positions(chunks, start, windows)
    itl, itl_pos, _times, itl_row = itl_samples_with_rows(
        chunks, positions, start, frame["e2e_ms"].to_numpy(dtype=float), frame["failed"].to_numpy(), windows
    )
    pos, end_pos = frame["pos"].to_numpy(), frame["end_pos"].to_numpy()
    measured, failed, cancelled = frame["measured"].to_numpy(), frame["failed"].to_numpy(), frame["cancelled"].to_numpy()
    e2e, tokens = frame["e2e_ms"].to_numpy(dtype=float), frame["completion_tokens"].to_numpy(dtype=float)
    ok = frame["ok"].to_numpy()
    validity = frame["output_valid"].to_numpy(dtype=float) if "output_valid" in frame else np.full(len(frame), np.nan)
    out: dict[int, LevelSamples] = {}
    for p, window in enumerate(windows):
        mine = measured & (pos == p) & ~cancelled
        ended = (end_pos == p) & ~cancelled & np.isfinite(e2e)
        level = LevelSamples(window.concurrency, window.duration_s, failed=failed[mine], served_e2e_ms=e2e[ended],
                             served_tokens=np.nan_to_num(tokens[ended]),
                             valid=validity[mine & ok & ~np.isnan(validity)] == 1.0)
        for metric, column in SAMPLE_COLUMNS.items():
            values = frame[column].to_numpy(dtype=float)[pos == p]
            values = values[~np.isnan(values)]
            level.latency[metric] = Clustered(values, np.arange(len(values)), len(values))
        here = itl_pos == p
        values, rows = itl[here], itl_row[here]
        if len(rows):
            unique, owner = np.unique(rows, return_inverse=True)
            level.latency["itl_ms"] = Clustered(values, owner.astype(np.int64), len(unique))
        else:
            level.latency["itl_ms"] = Clustered(values, rows.astype(np.int64), 0)
        previous = out.get(window.concurrency)
        if previous is None or len(previous.failed) < len(level.failed):
            out[window.concurrency] = level
    return out


def _arrays(samples: dict[int, LevelSamples]) -> list[tuple[str, str, bytes]]:
    """Every array (name, dtype, bytes) and scalar of ``samples``, in order."""
    out = []
    for conc, level in samples.items():
        out.append((f"{conc}", "meta", repr((level.concurrency, level.window_s)).encode()))
        for name in ("failed", "served_e2e_ms", "served_tokens", "valid"):
            array = getattr(level, name)
            out.append((f"{conc}/{name}", str(array.dtype), array.tobytes()))
        for metric, c in level.latency.items():
            out += [(f"{conc}/{metric}/values", str(c.values.dtype), c.values.tobytes()),
                    (f"{conc}/{metric}/owner", str(c.owner.dtype), c.owner.tobytes()),
                    (f"{conc}/{metric}/n", "int", str(c.n_owners).encode())]
    return out


def _run(tmp_path, concurrencies, *, merged: bool, seed: int = 3, started_later_s: float = 0.0):
    """The awkward records as a run folder: three part files, or merged into row groups of 100.
    ``started_later_s`` makes it another run of the same records (compare refuses a run given twice)."""
    rows, run = awkward_rows(seed=seed), awkward_run()
    run["started_wall"] += started_later_s
    for row in rows:
        row["level"] = concurrencies[row["level_index"]]
    for level, conc in zip(run["levels"], concurrencies):
        level["concurrency"] = conc
    writer = RequestWriter(tmp_path)
    for part in range(3):
        writer.write(records_to_table(rows[part::3]))
    if merged:
        writer.close()
        pq.write_table(pq.read_table(tmp_path / REQUESTS_PARQUET), tmp_path / REQUESTS_PARQUET, row_group_size=100)
    write_run_json(tmp_path, run)
    return tmp_path


@pytest.mark.parametrize("merged", [False, True], ids=["parts", "merged"])
@pytest.mark.parametrize("concurrencies", [(2, 4, 8), (2, 4, 2), (4, 4, 4)], ids=["plain", "repeated", "one"])
def test_streamed_samples_are_the_whole_runs_to_the_byte(tmp_path, monkeypatch, concurrencies, merged):
    monkeypatch.setattr(records_stream, "BATCH_CHUNKS", 150)
    monkeypatch.setattr(records_stream, "MIN_BATCH_ROWS", 16)
    folder = _run(tmp_path, concurrencies, merged=merged)
    run = read_run_json(folder)
    slo = SloSpec.from_dict(SLO)
    whole = read_requests(folder)
    before = analyze(whole, run, slo)
    expected = whole_run_level_samples(whole, before.run, before.requests)

    scalars = records_stream.read_scalars(folder)
    chunks = arrow_source(lambda: records_stream.chunk_batches(folder))
    assert len(list(chunks())) > 10  # really in batches
    after = analyze(scalars, run, slo, chunks=chunks)
    got = level_samples(scalars, after.run, after.requests, chunks)

    assert _arrays(got) == _arrays(expected)
    itl = [lv.latency["itl_ms"] for lv in got.values()]
    assert any(np.isinf(c.values).any() for c in itl)  # broken streams' stalls are there
    assert sum(c.n_owners for c in itl) > 100


def test_dense_owners_are_numpys_unique_inverse():
    rng = np.random.default_rng(1)
    for rows, n in ((rng.integers(0, 500, 5000), 600), (np.sort(rng.integers(0, 50, 300)), 50),
                    (np.array([], dtype=np.int32), 10), (np.array([], dtype=np.int32), 0), (np.array([7, 7, 3]), 8)):
        owner, k = dense_owners(rows.astype(np.int32), n)
        if len(rows):
            unique, inverse = np.unique(rows, return_inverse=True)
            assert k == len(unique) and owner.dtype == np.int64 and np.array_equal(owner, inverse)
        else:
            assert k == 0 and owner.dtype == np.int64 and len(owner) == 0


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_a_run_compares_the_same_from_part_files_and_a_damaged_list_column_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(records_stream, "BATCH_CHUNKS", 150)
    monkeypatch.setattr(records_stream, "MIN_BATCH_ROWS", 16)
    base = _run(tmp_path / "base", (2, 4, 8), merged=True)
    parts = _run(tmp_path / "parts", (2, 4, 8), merged=False, started_later_s=86_400)
    cand = _run(tmp_path / "cand", (2, 4, 8), merged=True, started_later_s=86_400)
    for folder in (base, parts, cand):
        assert _cli("analyze", str(folder))[0] == 0  # compare reads each run's summary.json too
    outputs = []
    for side in (cand, parts):
        code, out, err = _cli("compare", str(base), str(side), "--json", str(tmp_path / "c.json"))
        compared = json.loads((tmp_path / "c.json").read_text())
        outputs.append((code, compared["checks"], compared["outcome"]))
    assert outputs[0] == outputs[1] and outputs[0][0] in (0, 6)

    # a data page of chunk_ms overwritten: the scalar columns read, the lists do not
    meta = pq.ParquetFile(cand / REQUESTS_PARQUET).metadata
    leaf = [meta.schema.column(i).path for i in range(meta.num_columns)].index("chunk_ms.list.element")
    offset = meta.row_group(0).column(leaf).data_page_offset
    data = bytearray((cand / REQUESTS_PARQUET).read_bytes())
    data[offset : offset + 32] = b"\xff" * 32
    (cand / REQUESTS_PARQUET).write_bytes(bytes(data))
    assert len(records_stream.read_scalars(cand)) == len(read_requests(base))
    code, out, err = _cli("compare", str(base), str(cand))
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"loadtest compare: error: candidate {cand / REQUESTS_PARQUET}: cannot read the records (")
    assert not (parts / REQUESTS_PARQUET).exists() and (parts / PARTS_DIR).is_dir()


def test_drawing_one_run_at_a_time_gives_the_intervals_of_both_runs_held_together(tmp_path, monkeypatch):
    """Each run's replicates come from its own stream, so drawing them run after run changes no interval."""
    base = _run(tmp_path / "base", (2, 4, 2), merged=True)
    cand = _run(tmp_path / "cand", (2, 4, 2), merged=False, seed=4, started_later_s=86_400)
    made: list[dict] = []
    real = engine.level_samples

    def kept(*args):  # each run's samples, kept here (the comparison drops its own once drawn)
        made.append(real(*args))
        return dict(made[-1])

    monkeypatch.setattr(engine, "level_samples", kept)
    cmp = engine.compare_runs(base, cand, Rules())
    samples_b, samples_c = made
    levels = {int(lv["concurrency"]): lv for lv in cmp.candidate.summary["levels"] if lv.get("status") != "no_data"}
    checked = 0
    for change in cmp.changes:
        if change.level is None:
            continue
        conc, check = change.level, change.check
        sb, sc = samples_b[conc], samples_c[conc]
        rng_b, rng_c = rng_for(0, "compare-baseline", conc, check), rng_for(0, "compare-candidate", conc, check)
        if change.kind == "latency":  # as level_changes drew them before: both runs' samples at hand
            metric, _, pct = check.partition(".")
            q = PERCENTILES[pct]
            reps = delta.relative_change(delta.percentile_replicates(sc.latency[metric], q, rng_c),
                                         delta.percentile_replicates(sb.latency[metric], q, rng_b))
        elif check == THROUGHPUT:
            reps = delta.relative_change(
                delta.throughput_replicates(change.candidate, sc.served_e2e_ms, sc.served_tokens, rng_c),
                delta.throughput_replicates(change.baseline, sb.served_e2e_ms, sb.served_tokens, rng_b))
        else:
            flags = (sb.failed, sc.failed) if check == ERROR_RATE else (sb.valid, sc.valid)
            reps = delta.share_replicates(flags[1], rng_c) - delta.share_replicates(flags[0], rng_b)
        assert repr(change.ci) == repr(delta.central_interval(reps, cmp.confidence)), (conc, check)
        checked += 1
    assert checked >= 6 and set(levels) == {2, 4}
