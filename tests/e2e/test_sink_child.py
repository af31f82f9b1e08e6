"""The record sink with its real writer process: same part files as the in-process sink, and
nothing lost when the process dies, hangs, or cannot store a batch (the sink takes over)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from loadtest.load import sink as sink_module
from loadtest.load.batch import decode_table
from loadtest.load.progress import LevelFigures, RunProgress
from loadtest.load.sink import RunSink
from loadtest.records import SCHEMA, RequestWriter, read_parts
from tests.unit.test_sink_frames import _batch

pytestmark = pytest.mark.untimed


def _batches(n: int) -> list[dict]:
    """``n`` flushes of 5 records each, over two levels, the odd ones failed (records that must be kept)."""
    return [_batch(5, level_index=i // 3, start=5 * i, ok=i % 2 == 0) for i in range(n)]


def _parts(run_dir: Path) -> list[pa.Table]:
    return [pa.parquet.read_table(p) for p in sorted((run_dir / "requests.parts").glob("*.parquet"))]


def _in_process(tmp_path: Path, batches: list[dict]) -> tuple[list[pa.Table], RunProgress]:
    sink = RunSink(RequestWriter(tmp_path / "here"), RunProgress(), child=False)
    for b in batches:
        sink(b)
    sink.close()
    return _parts(tmp_path / "here"), sink.progress


def test_the_writer_process_writes_what_the_sink_in_this_process_wrote(tmp_path):
    batches = _batches(6)
    expected, progress = _in_process(tmp_path, batches)
    sink = RunSink(RequestWriter(tmp_path / "child"), RunProgress())
    assert sink.child is not None
    for b in batches:
        sink(b)
    sink.drain()
    assert sink.fallback_reason is None
    got = _parts(tmp_path / "child")
    assert len(got) == len(expected) == 6 and all(g.equals(e) for g, e in zip(got, expected))
    assert got[0].schema == SCHEMA
    # the live figures came back computed: the same as this process computes them
    for (i, mine), (j, theirs) in zip(sink.progress.snapshot(), progress.snapshot()):
        assert i == j and isinstance(mine, LevelFigures)
        assert (mine.requests, mine.errors, mine.concurrency, mine.rate_rps, mine.p95()) == (
            theirs.requests, theirs.errors, theirs.concurrency, theirs.rate_rps, theirs.p95())
        assert mine.percentiles("itl") == theirs.percentiles("itl")
    assert sink.progress.total == progress.total == 30
    proc = sink.child.proc
    sink.close()
    assert proc.poll() == 0  # it ended at the end of its input



@pytest.mark.parametrize("child", [True, False], ids=["writer process", "in this process"])
def test_the_live_figures_leave_out_what_a_level_started_after_its_window(tmp_path, child):
    """The table does not count a request started in the hold (after the window's end): nor does the
    live line, which learns each ended level's window end with every batch (``RunSink.window_ends``)."""
    sink = RunSink(RequestWriter(tmp_path / "run"), RunProgress(), child=child)
    sink.window_ends = lambda: {0: 1002.5}  # level 0's 5 records start at 1000, 1001, … 1004
    sink(_batch(5, level_index=0))
    sink(_batch(5, level_index=1, start=5))  # level 1 is still running: all its records count
    sink.close()
    levels = dict(sink.progress.snapshot())
    assert (levels[0].requests, levels[1].requests) == (3, 5)
    assert sink.progress.total == 10  # the run's total is every record written


def test_a_killed_writer_loses_nothing_and_the_sink_says_it_took_over(tmp_path, caplog):
    batches = _batches(8)
    expected, _ = _in_process(tmp_path, batches)
    sink = RunSink(RequestWriter(tmp_path / "child"), RunProgress())
    for b in batches[:3]:
        sink(b)
    sink.drain()
    with caplog.at_level(logging.WARNING):
        sink.child.proc.kill()
        for b in batches[3:]:
            sink(b)
        sink.drain()
    assert sink.child is None and "closed its output" in sink.fallback_reason
    assert "writing records in this process from now on" in caplog.text
    got = _parts(tmp_path / "child")
    assert len(got) == 8 and all(g.equals(e) for g, e in zip(got, expected))
    assert sink.progress.total == 40
    level1 = dict(sink.progress.snapshot())[1]
    assert (level1.requests, level1.errors) == (15, 10)  # batches 3-5 (3 and 5 failed): counts go on from its last report
    sink.close()


def test_a_writer_that_stops_answering_is_stopped_and_its_batches_stored_here(tmp_path, monkeypatch):
    """SIGSTOP: it may have written some of them without saying so; those are written again, same name, same rows."""
    batches = _batches(5)
    expected, _ = _in_process(tmp_path, batches)
    sink = RunSink(RequestWriter(tmp_path / "child"), RunProgress())
    sink(batches[0])
    sink.drain()  # started (its imports take about a second)
    monkeypatch.setattr(sink_module, "ANSWER_TIMEOUT_S", 1.0)
    proc = sink.child.proc
    for b in batches[1:]:
        sink(b)
    os.kill(proc.pid, signal.SIGSTOP)
    sink.drain()
    assert sink.fallback_reason == "no answer within 1 s" and proc.poll() is not None
    got = pa.concat_tables(_parts(tmp_path / "child"))
    assert got.equals(pa.concat_tables(expected)) and got.equals(read_parts(tmp_path / "child" / "requests.parts", SCHEMA))
    sink.close()


def test_a_batch_the_writer_cannot_store_is_stored_here_and_fails_as_it_always_did(tmp_path):
    bad = _batch(2, start=100)
    bad["user"] = ["not a number", 1]
    sink = RunSink(RequestWriter(tmp_path / "child"), RunProgress())
    sink(_batch(3))
    sink(bad)
    sink(_batch(3, start=200))
    with pytest.raises(pa.ArrowInvalid):
        sink.drain()
    assert "could not store a batch (ArrowInvalid" in sink.fallback_reason
    assert [t.num_rows for t in _parts(tmp_path / "child")] == [3, 3]  # before and after it, in order
    sink.close()


def test_with_live_metrics_the_writer_buckets_each_batch_once_as_this_process_would(tmp_path):
    """--metrics-port: the buckets come back from the writer, equal to bucketing the tables here; after
    a take-over the rest are bucketed here, and no batch is counted twice."""
    from loadtest.export.live import LiveMetrics  # the collector of --metrics-port, only for this test

    batches = _batches(6)
    here = LiveMetrics("s")
    for b in batches:
        here.observe(pa.concat_tables([decode_table(b)]))
    there = LiveMetrics("s")
    sink = RunSink(RequestWriter(tmp_path), RunProgress())
    sink.observers.append(there.observe)
    sink.watchers.append(there.take)
    for b in batches[:4]:
        sink(b)
    sink.drain()
    sink.child.proc.kill()
    for b in batches[4:]:
        sink(b)
    sink.close()
    assert sink.fallback_reason is not None
    sink._pool.join()  # the last watcher calls
    assert [str(m) for m in there.collect()] == [str(m) for m in here.collect()]


_PATCHED_CLOSE = r"""
import sys
from gevent import monkey
monkey.patch_all()  # as Locust does in a run: os.close becomes gevent's
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from loadtest.load.progress import RunProgress
from loadtest.load.sink import RunSink
from loadtest.records import RequestWriter
from tests.unit.test_sink_frames import _batch

sink = RunSink(RequestWriter(Path(sys.argv[1])), RunProgress())
child = sink.child
sink(_batch(5, level_index=0, start=0, ok=True))
sink.close()
print(child.proc.returncode, sink.fallback_reason)
"""


def test_under_gevents_patches_the_writer_process_ends_at_the_end_of_its_input(tmp_path):
    """The run's end closes the pipe and the writer process exits by itself (status 0), not killed.

    Under Locust's patches ``os.close`` is gevent's, which only schedules the close: the pipe
    stayed open, and every run waited out the 10 s close timeout and killed the writer (-9).
    """
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _PATCHED_CLOSE, str(tmp_path / "run"), str(repo)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "None"], done.stdout + done.stderr
    assert len(list((tmp_path / "run" / "requests.parts").glob("*.parquet"))) == 1
