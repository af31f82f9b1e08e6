"""The record writer's protocol, without a process: frames in, part files and answer lines out."""

from __future__ import annotations

import io
import json
from array import array

import numpy as np
import pyarrow.parquet as pq

from loadtest.client.record import RequestRecord
from loadtest.load.batch import RecordBuffer, decode_table
from loadtest.load.sink_frames import encode_frame, read_frame
from loadtest.load.sink_worker import serve


def _batch(n: int, level_index: int = 0, start: int = 0, ok: bool = True) -> dict:
    buffer = RecordBuffer("local")
    buffer._seq = start
    for i in range(n):
        rec = RequestRecord(start_wall=1000.0 + i, start_perf=0.0, ttfb_ms=5.0 + i, ttft_ms=10.0 + i, e2e_ms=50.0,
                            chunk_ms=array("d", [10.0 + i, 20.0 + i, 35.0 + i]), chunk_tokens=array("i", [1, 1, 2]),
                            status=200 if ok else 0, error_kind=None if ok else "timeout",
                            error=None if ok else "read timed out")
        buffer.add(rec, user=i, level=4, level_index=level_index, warmup=False)
    batch = buffer.take()
    batch["in_flight"] = {"start_wall": [1.0]}
    batch["source"] = "local"
    return batch


def _stream(*batches: dict) -> io.BytesIO:
    return io.BytesIO(b"".join(b"".join(encode_frame(seq, b)) for seq, b in enumerate(batches, 1)))


def test_a_frame_carries_the_columns_and_leaves_the_in_flight_snapshot_behind():
    batch = _batch(3)
    seq, got = read_frame(_stream(batch))
    assert seq == 1 and "in_flight" not in got and "source" not in got
    assert decode_table(got).equals(decode_table(batch))


def test_a_numpy_scalar_arrives_as_the_number_it_was():
    batch = _batch(2)
    batch["ttfb_ms"] = [np.float64(5.0), None]  # marshal would have sent its bytes
    batch["status"] = [np.int64(200), 200]
    _, got = read_frame(_stream(batch))
    assert got["ttfb_ms"] == [5.0, None] and got["status"] == [200, 200]
    assert decode_table(got).equals(decode_table(batch))


def test_a_cut_off_frame_is_the_end_of_the_input():
    whole = _stream(_batch(2)).getvalue()
    assert read_frame(io.BytesIO(whole[:-1])) is None
    assert read_frame(io.BytesIO(whole[:5])) is None
    assert read_frame(io.BytesIO(b"")) is None


def test_the_writer_stores_each_batch_as_the_next_part_and_answers_with_figures(tmp_path):
    first, second = _batch(4, 0), _batch(3, 1, start=4, ok=False)
    out = io.BytesIO()
    assert serve(tmp_path, 7, _stream(first, second), out) == 0
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(a["seq"], a["next_part"], a["total"]) for a in answers] == [(1, 8, 4), (2, 9, 7)]
    assert sorted(p.name for p in (tmp_path / "requests.parts").iterdir()) == ["000007.parquet", "000008.parquet"]
    assert pq.read_table(tmp_path / "requests.parts" / "000007.parquet").equals(decode_table(first))
    level0, level1 = answers[0]["levels"]["0"], answers[1]["levels"]["1"]
    assert (level0["requests"], level0["errors"], level0["concurrency"]) == (4, 0, 4)
    assert level0["percentiles"]["ttft"]["p50"] == 11.5  # ttft 10, 11, 12, 13
    # gaps of 10 ms (one token) and 15 ms (a chunk of two: 7.5 ms a token, as the analysis counts ITL)
    assert level0["percentiles"]["itl"]["p95"] == 10.0
    assert (level1["requests"], level1["errors"]) == (3, 3)


def test_a_batch_it_cannot_store_is_named_and_ends_it(tmp_path):
    bad = _batch(2)
    bad["user"] = ["not a number", 1]
    out = io.BytesIO()
    assert serve(tmp_path, 0, _stream(_batch(1), bad, _batch(1)), out) == 1
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert answers[0]["seq"] == 1 and answers[1]["seq"] == 2 and "failed" in answers[1] and len(answers) == 2
    assert [p.name for p in (tmp_path / "requests.parts").iterdir()] == ["000000.parquet"]


def _at(batch: dict, first_wall: float, **keys) -> dict:
    """``batch`` with its requests started one a second from ``first_wall``, and the batch keys given."""
    batch["start_wall"] = [first_wall + i for i in range(len(batch["start_wall"]))]
    return {**batch, **keys}


def test_rows_started_after_an_open_look_wait_for_its_verdict_before_the_live_figures(tmp_path):
    """A look ends its level's window at its own instant, but the judge answers later.

    A request started after the look and flushed before the verdict used to be folded in while the
    level had no end, so it counted as measured though it started in the hold (a trial's open-loop
    line read 35 requests against the table's 31). Now it waits for the verdict: here the look at
    1002.0 ends the level (the next batch brings the end) and only the two requests before it count;
    if the look lets the level go on, the waiting three count with the next batch's two.
    """
    looking = _at(_batch(5), 1000.0, _looks_open={0: 1002.0})
    ended = _at(_batch(2, start=5), 1005.0, _window_ends={0: 1002.0})
    goes_on = _at(_batch(2, start=5), 1005.0, _looks_open={})
    for second, requests in ((ended, 2), (goes_on, 7)):
        out = io.BytesIO()
        folder = tmp_path / str(requests)
        folder.mkdir()
        assert serve(folder, 0, _stream(looking, second), out) == 0
        answers = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [a["levels"]["0"]["requests"] for a in answers] == [2, requests]
        assert [a["total"] for a in answers] == [5, 7]  # every row counts in the run's total on arrival
        # every row is stored as it arrived: only the live figures wait
        stored = sorted(p.name for p in (folder / "requests.parts").iterdir())
        assert sum(pq.read_table(folder / "requests.parts" / name).num_rows for name in stored) == 7
