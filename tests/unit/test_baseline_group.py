"""``loadtest baseline promote|exists`` of a ``run --repeat K`` folder (run-01 … run-K, no run.json of its own).

Trial E ran the documented nightly job with ``--repeat 2``: ``promote "$RUN_DIR"`` refused the group
("not a run folder (no run.json)", exit 2), so every passing night of the CronJob exited 5 and the
first night never made a baseline; ``exists`` called the group "no baseline" (1), on which a night
runs ungated. A promote now makes the group's median run the baseline and says which; ``exists``
says the folder is a group, not a baseline (2). Real run folders (synthetic records, analyzed as
``loadtest run`` leaves them), the command in-process.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from loadtest.repeats import representative
from support.gate_runs import T0, cli, write_run

LEVELS = dict(levels=(1, 2), duration=3.0)


@pytest.fixture(scope="module")
def group(tmp_path_factory) -> Path:
    """A --repeat 3 folder as `run --repeat 3 --baseline …` leaves it: a warm-up, three runs (the middle
    one in speed is run-03), the comparison's outputs beside them."""
    night = tmp_path_factory.mktemp("night") / "nightly-1"
    with contextlib.redirect_stdout(io.StringIO()):
        write_run(night / "warmup", scale=3.0, seed=9, t0=T0, **LEVELS)
        for i, scale in enumerate((1.0, 1.3, 1.1), start=1):
            write_run(night / f"run-{i:02d}", scale=scale, seed=10 + i, t0=T0 + i * 60, **LEVELS)
    (night / "warmup" / "run.json").write_text(
        json.dumps({**json.loads((night / "warmup" / "run.json").read_text()), "warmup_run": True}))
    (night / "compare.json").write_text(json.dumps({"outcome": "pass", "candidates": []}))
    return night


def _started(folder: Path) -> float:
    return json.loads((folder / "run.json").read_text())["started_wall"]


def test_promote_of_a_repeat_folder_makes_its_median_run_the_baseline_and_says_which(group, tmp_path):
    baseline = tmp_path / "baseline"
    code, out, err = cli("baseline", "promote", str(group), str(baseline))
    assert code == 0, err
    # the median in speed of 1.0, 1.3 and 1.1: run-03; never the warm-up (3.0), though it is in the folder
    assert _started(baseline) == _started(group / "run-03")
    assert f"baseline {baseline} is now {group / 'run-03'}: the median run of the group of 3" in out
    assert "nearest the group's medians" in out and len(out.strip().splitlines()) == 1, out
    assert sorted(p.name for p in baseline.iterdir()) == ["requests.parquet", "run.json", "summary.json"]
    assert cli("baseline", "exists", str(baseline))[0] == 0
    # the baseline is one run the gate reads as any other
    code, out, err = cli("compare", str(baseline), str(group / "run-01"))
    assert code in (0, 1, 6), out + err


def test_a_group_of_two_promotes_its_first_run_and_says_why(group, tmp_path):
    """Two runs lie equally near their median (its midpoint): the first, said as such."""
    two = tmp_path / "two"
    for name in ("run-01", "run-02"):
        shutil.copytree(group / name, two / name)
    code, out, err = cli("baseline", "promote", str(two), str(tmp_path / "baseline"))
    assert code == 0, err
    assert _started(tmp_path / "baseline") == _started(two / "run-01")
    assert "run-01 and run-02 lie equally near the group's medians" in out and ": the first" in out, out


def test_exists_calls_a_repeat_folder_no_baseline_the_gate_can_read(group):
    """1 ("no baseline") would run the night ungated and promote over the group: 2, and what to do."""
    code, _, err = cli("baseline", "exists", str(group))
    assert code == 2, err
    assert f"{group}: a --repeat folder (run-01, run-02, run-03), not a baseline (one run)" in err
    assert f"`loadtest baseline promote {group} BASELINE`" in err and len(err.strip().splitlines()) == 1


def test_a_group_with_an_interrupted_or_unanalyzed_run_is_never_promoted(group, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(group, broken)
    baseline = tmp_path / "baseline"
    assert cli("baseline", "promote", str(group / "run-01"), str(baseline))[0] == 0
    kept = {p.name: p.read_bytes() for p in baseline.iterdir()}
    run = json.loads((broken / "run-02" / "run.json").read_text())
    (broken / "run-02" / "run.json").write_text(json.dumps({**run, "complete": False}))
    code, _, err = cli("baseline", "promote", str(broken), str(baseline))
    assert code == 2 and f"{broken / 'run-02'}: the run did not complete; a group with an interrupted run" in err, err
    (broken / "run-02" / "run.json").write_text(json.dumps(run))
    (broken / "run-03" / "summary.json").unlink()
    code, _, err = cli("baseline", "promote", str(broken), str(baseline))
    assert code == 2 and f"{broken / 'run-03'}: no summary.json" in err, err
    assert {p.name: p.read_bytes() for p in baseline.iterdir()} == kept


def test_a_command_given_a_repeat_folder_for_one_run_names_what_it_is(group):
    code, _, err = cli("analyze", str(group))
    assert code == 2 and "a --repeat folder holding run-01, run-02, run-03: give one of them" in err, err


def _summary(capacity: float | None, itl: float) -> dict:
    return {"slo": {"itl_ms": {"p95": 100}}, "capacity": {"concurrency": capacity},
            "levels": [{"concurrency": 4, "requests": 50, "output_tokens_per_s": 1000 / itl,
                        "itl_ms": {"p50": itl * 0.8, "p95": itl}}]}


def test_the_group_capacity_decides_first_as_the_gate_takes_it():
    """The gate's group capacity is its median run's (median_low): with capacities 4, 8, 8 the run of 8
    nearest the medians, not the run nearest in speed whose capacity is not the group's."""
    pick = representative([_summary(8, 30.0), _summary(4, 25.0), _summary(8, 26.0)], ["run-01", "run-02", "run-03"])
    assert pick.index == 2 and "its capacity, 8 users, is the group's median" in pick.why
    # median_low of two: the lower capacity, as the gate's group capacity
    pick = representative([_summary(8, 30.0), _summary(4, 25.0)], ["run-01", "run-02"])
    assert pick.index == 1 and "4 users" in pick.why
    # no capacity in any run (short levels, every one uncertain): the values alone decide
    pick = representative([_summary(None, 30.0), _summary(None, 20.0), _summary(None, 26.0)], ["a", "b", "c"])
    assert pick.index == 2 and "no run of it has a capacity" in pick.why
