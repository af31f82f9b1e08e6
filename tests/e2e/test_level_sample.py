"""A level's self-check figures take bounded memory, and ordinary levels keep their exact figures.

The soak benchmark found the client's RSS creeping by 8 bytes per stream read:
the self-monitor kept every read's stamp delay for the whole level. These
tests pin the cure: exact values below the cap (the same figures as before,
bit for bit), a fixed-size histogram past it whose quantiles are within its
bin width (0.1%), and the monitor's summary built from folded stretches equal
to the one built at once.
"""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from loadtest.client.reader_health import ReaderHealth
from loadtest.load.level_sample import LevelSample
from loadtest.load.monitor import LevelFigures, summarize

pytestmark = pytest.mark.solo

QS = [0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]


@pytest.mark.untimed
def test_below_the_cap_the_quantiles_are_numpys_exactly() -> None:
    values = np.random.default_rng(3).exponential(0.3, 5_000)
    sample = LevelSample(cap=10_000)
    for part in np.array_split(values, 7):
        sample.add(part)
    assert not sample.folded
    assert np.array_equal(sample.quantiles(QS), np.quantile(values, QS))
    assert sample.max() == values.max()


@pytest.mark.untimed
def test_past_the_cap_memory_stops_growing_and_quantiles_stay_within_a_bin() -> None:
    rng = np.random.default_rng(4)
    sample = LevelSample(cap=1_000)
    every = []
    sizes = []
    for _ in range(50):
        part = rng.lognormal(-1.0, 1.2, 20_000)
        part[:50] = 0.0  # a read that was not late at all
        every.append(part)
        sample.add(part)
        sizes.append(sample._counts.nbytes + sum(p.nbytes for p in sample._parts))
    values = np.concatenate(every)
    assert sample.folded and len(sample) == len(values)
    assert len(set(sizes)) == 1  # the same bytes after 20k values as after 1M
    exact, folded = np.quantile(values, QS[1:-1]), sample.quantiles(QS[1:-1])
    assert np.all(np.abs(folded / exact - 1) <= 0.0005 + 1e-12), (folded, exact)
    assert sample.max() == values.max() and sample.quantiles([0.0])[0] == 0.0


@pytest.mark.untimed
def test_an_empty_sample_reads_as_nothing_late() -> None:
    sample = LevelSample()
    assert sample.percentile(99) == 0.0 and sample.max() == 0.0


def _reader(rng: np.random.Generator, n: int) -> ReaderHealth:
    return ReaderHealth(
        batch_ms=array("d", rng.exponential(0.05, n // 10)),
        tick_lag_ms=array("d", rng.exponential(0.2, n // 10)),
        waiting_bound_ms=array("d", rng.exponential(0.1, n)),
        woken_tail_ms=array("d"),  # no woken reads: the pairing with wake-ups plays no part
        busy_s=0.5,
        measured_ms=array("d", rng.exponential(0.02, n // 2)),
    )


def _joined(parts: list[ReaderHealth]) -> ReaderHealth:
    join = lambda name: array("d", np.concatenate([np.frombuffer(getattr(p, name)) for p in parts]))  # noqa: E731
    return ReaderHealth(join("batch_ms"), join("tick_lag_ms"), join("waiting_bound_ms"), join("woken_tail_ms"),
                        sum(p.busy_s for p in parts), join("measured_ms"))


@pytest.mark.untimed
def test_a_level_summarized_from_folded_stretches_equals_it_summarized_at_once() -> None:
    rng = np.random.default_rng(5)
    stretches = [_reader(rng, 3_000) for _ in range(4)]
    lags = [rng.exponential(0.3, 500) for _ in range(4)]
    at_once = summarize(np.concatenate(lags), _joined(stretches), 30.0, 10.0)
    earlier = LevelFigures()
    for lag, health in zip(lags[:-1], stretches[:-1]):
        earlier.add(lag, health, ReaderHealth())
    folded = summarize(lags[-1], stretches[-1], 30.0, 10.0, earlier=earlier)
    assert folded == at_once
    assert earlier.busy_s == sum(h.busy_s for h in stretches)


_CHILD = r"""
import locust  # gevent's patches, as in a run
import gevent
from loadtest.load import monitor

monitor.FOLD_AT = 50  # fold after half a second of loop-lag samples
m = monitor.SelfMonitor()
m.start()
gevent.sleep(2.5)
folded = m._figures is not None and len(m._figures.lags) >= 50  # one check (100 ticks, ~1 s) is enough
pending = len(m._lags)
report = m.cut()
m.stop()
print(folded, pending, report["loop_lag_max_ms"] >= report["loop_lag_p99_ms"] >= 0, report["send_delay_ms"]["max"] >= 0)
"""


def test_a_running_monitor_folds_its_samples_as_the_level_goes() -> None:
    """The real watch loop (in a child: gevent must not patch pytest's process) folds past FOLD_AT."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    folded, pending, figures_ok, table_ok = out.stdout.split()
    assert folded == "True"
    assert int(pending) < 150  # what is left unfolded stays below the threshold plus one check's worth
    assert figures_ok == "True" and table_ok == "True"
