"""One run in several folders is one run, in ``history`` as in ``compare --history``.

A user trial ran ``loadtest history`` over the nightly layout (docs/gate.md): the baseline folder
is a copy of a promoted night (``loadtest baseline promote RUN BASELINE``). The table listed the
night twice (``baseline … pass`` and ``workers2 … pass``), judged against itself, and named rows by
the folder's name alone, so two distinct runs in folders of one name read as one run twice.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from support.synthetic import closed_loop_rows, level_plan, write_run_folder
from loadtest.cli import main

T0 = 1_764_000_000.0
DAY = 86_400.0
SCENARIO = {
    "name": "nightly",
    "target": {"base_url": "http://127.0.0.1:8000/v1", "model": "mock-model", "api": "chat"},
    "workload": {"prompt_tokens": {"mean": 64, "stddev": 0}, "max_tokens": 16, "seed": 0},
    "load": {"levels": [1, 2], "level_duration_s": 6, "warmup_s": 1, "warmup_requests": 0},
    "slo": {"ttft_ms": {"p95": 10_000}, "itl_ms": {"p95": 10_000}, "max_error_rate": 0.5},
}


def write_night(folder: Path, night: int) -> Path:
    """A run folder (records, run.json, summary.json, report.html) started ``night`` days after T0."""
    plan = level_plan(SCENARIO["load"]["levels"], 6.0, t0=T0 + night * DAY)
    rows = []
    for lv in plan:
        c = lv["concurrency"]
        rows += closed_loop_rows(lv["index"], c, lv["start_wall"], 6.0, ttft_ms=40.0 * c, itl_ms=10.0 * c,
                                 chunks=16, warmup_s=1.0, seed=night + 7 * lv["index"], jitter=0.03)
    return write_run_folder(folder, rows, plan, SCENARIO)


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> Path:
    """``results/night-0..2``, night-2 promoted to ``results/baseline``, and a plain copy of night-0 in ``old/``."""
    root = tmp_path_factory.mktemp("nights")
    for night in range(3):
        write_night(root / "results" / f"night-{night}", night)
    assert cli("baseline", "promote", str(root / "results" / "night-2"), str(root / "results" / "baseline"))[0] == 0
    shutil.copytree(root / "results" / "night-0", root / "old" / "night-0")
    return root


def run_column(out: str) -> list[str]:
    """The terminal table's ``run`` column (its last), one per row."""
    lines = out.splitlines()
    start = lines[0].index("run")
    rows = [line for line in lines[1:] if line[:4].isdigit()]  # a row starts with its date
    return [line[start:].strip() for line in rows]


def test_history_lists_a_run_once_whatever_folders_hold_copies_of_it(nights, tmp_path):
    code, out, err = cli("history", str(nights / "results"), str(nights / "old"),
                         "--html", str(tmp_path / "h.html"), "--json", str(tmp_path / "h.json"))
    assert code == 0, out + err
    rows = json.loads((tmp_path / "h.json").read_text())["runs"]
    # three runs, not five: the promoted baseline is night-2, and old/night-0 is night-0
    assert len(rows) == 3, rows
    # the kept copy of the promoted night is its own folder (it has the run's report.html), not the baseline
    assert rows[2]["run"] == str((nights / "results" / "night-2").resolve())
    assert [r["vs_previous"] for r in rows][0] == "first"
    assert run_column(out) == ["night-0", "night-1", "night-2"], out
    # each left-out copy is said, once, with the run it is
    baseline = (nights / "results" / "baseline").resolve()
    assert f"loadtest history: {baseline}: the same run as {rows[2]['run']}" in err, err
    assert err.count("listed once") == 2, err
    assert "3 runs over time" in (tmp_path / "h.html").read_text()


def test_history_tells_apart_distinct_runs_in_folders_of_one_name(nights, tmp_path):
    for where, night in (("nightly", 0), ("hist2", 1)):
        shutil.copytree(nights / "results" / f"night-{night}", tmp_path / where / "qs_b1")
    code, out, err = cli("history", str(tmp_path / "nightly"), str(tmp_path / "hist2"),
                         "--html", str(tmp_path / "h.html"))
    assert code == 0, out + err
    assert run_column(out) == ["nightly/qs_b1", "hist2/qs_b1"], out
    assert "<td>nightly/qs_b1</td>" in (tmp_path / "h.html").read_text()


def test_distinct_labels_lengthen_only_the_names_that_coincide():
    from loadtest.compare.history import distinct_labels

    folders = [Path("/r/nightly/qs_b1"), Path("/r/hist2/qs_b1"), Path("/r/night-3"),
               Path("/a/x/run"), Path("/b/x/run")]
    assert distinct_labels(folders) == ["nightly/qs_b1", "hist2/qs_b1", "night-3", "a/x/run", "b/x/run"]
    assert distinct_labels([Path("/r/one")]) == ["one"]


def test_compare_history_counts_two_copies_of_a_history_run_once(nights, tmp_path):
    """The gate already left out a history copy of a compared run; two copies of an earlier night
    (``results/night-0`` and ``old/night-0``) counted as two reference runs."""
    results = nights / "results"
    code, out, _ = cli("compare", str(results / "night-1"), str(results / "night-2"),
                       "--history", str(results), str(nights / "old"), "--json", str(tmp_path / "c.json"))
    assert code in (0, 6), out
    assert json.loads((tmp_path / "c.json").read_text())["history_runs"] == 2, out  # night-1 and night-0


def test_the_verdict_column_says_it_is_against_the_reference_runs_not_the_previous_row(nights, tmp_path):
    """Trial E: `history` headed its verdicts "vs_previous", but each run is judged as the gate judges a
    night, against the mean of the runs before it once there are enough, so run-02 of a slow night read
    "regression" beside an identical run-01, and the night that recovered read "pass". The terminal and
    the page now head it "vs reference" and say what it is; history.json keeps the key."""
    import html

    from loadtest.compare.noise import MIN_HISTORY_RUNS

    code, out, err = cli("history", str(nights / "results"), "--html", str(tmp_path / "h.html"),
                         "--json", str(tmp_path / "h.json"))
    assert code == 0, out + err
    assert [r["vs_previous"] for r in json.loads((tmp_path / "h.json").read_text())["runs"]][0] == "first"
    header = out.splitlines()[0]
    assert "vs reference" in header and "vs_previous" not in header, out
    legend = "vs reference: the gate's verdict (default rules) on each run against the runs of its workload before it"
    assert legend in out and f"with at least {MIN_HISTORY_RUNS} of them, against their mean" in out, out
    assert "not against the previous row" in out
    page = (tmp_path / "h.html").read_text()
    assert "<th>vs reference</th>" in page and html.escape(legend) in page
