"""What ``compare``, ``analyze``, ``history`` and ``run --baseline`` are given: what they read, and what they refuse.

A gate that passes a run it could not judge is worse than one that fails it: runs of another
workload, a run compared with itself or with its copy, a summary without levels, another table or a
damaged part file in place of the records, a run whose levels are rates beside one whose levels are
users, a history folder that is not there. Each is refused in one line naming the file, exit 2 (and by ``run`` before any load),
never passed; a history kept as links is read, and a run that history leaves out is named.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

from support import gate_runs
from support.gate_runs import EARLIER, T0, cli, scenario_dict, write_run


#: The module-scoped pair of runs (support/gate_runs.py), bound here so that pytest finds it as this file's fixture.
pair = gate_runs.pair


def test_incomparable_runs_and_bad_input_exit_2_with_one_line(pair, tmp_path):
    _, base, _, _ = pair
    with contextlib.redirect_stdout(io.StringIO()):
        other = write_run(tmp_path / "other", levels=(1, 2, 8))
    code, out, err = cli("compare", str(base), str(other))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "levels: [1,2,4] → [1,2,8]" in err
    code, _, err = cli("compare", str(base), str(tmp_path / "missing"))
    assert code == 2 and "no such run folder" in err
    code, _, err = cli("compare", str(base), str(base), "--tolerance", "itl_ms.p97=3%")
    assert code == 2 and "p97" in err
    # a run compared with itself would pass every check: refused, as a folder or its summary.json
    for same in (str(base), str(base / "summary.json"), str(base) + "/"):
        code, out, err = cli("compare", str(base), same)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "is the same run as" in err, err
        assert "Traceback" not in err and "No regression" not in out
    # so is a copy of it elsewhere (a promotion run twice, a candidate path pointed at the baseline's
    # copy), which passed every check; as a candidate, and among the --also-* runs
    copy = shutil.copytree(base, tmp_path / "copy")
    for args in ([str(base), str(copy)], [str(copy), str(base)]):
        code, out, err = cli("compare", *args)
        assert code == 2 and "is the same run as" in err and "a copy: 'nightly', started" in err, err
        assert len(err.strip().splitlines()) == 1 and "No regression" not in out
    _, _, same, _ = pair
    code, out, err = cli("compare", str(base), str(same), "--also-candidate", str(copy))
    assert code == 2 and f"--also-candidate {copy} is the same run as baseline {base}" in err, err
    code, out, err = cli("compare", str(base), str(same), "--also-baseline", str(same))
    assert code == 2 and f"candidate {same} is the same run as --also-baseline {same} (the same folder): give each run once" \
        in err, err


def test_a_summary_without_levels_and_no_records_is_refused_not_passed(pair, tmp_path):
    """A summary cut to its capacity (no ``levels``) in a folder without records passed the gate
    as "no regression": only the capacity was compared. It is not a summary the gate can judge."""
    _, base, same, _ = pair
    gutted = tmp_path / "gutted"
    shutil.copytree(same, gutted)
    summary = json.loads((gutted / "summary.json").read_text())
    del summary["levels"]
    (gutted / "summary.json").write_text(json.dumps(summary))
    (gutted / "requests.parquet").unlink()
    for args in ((str(base), str(gutted)), (str(gutted), str(base)), (str(base), str(gutted / "summary.json"))):
        code, out, err = cli("compare", *args)
        assert code == 2 and "No regression" not in out, out
        assert f"{gutted / 'summary.json'}: not a loadtest summary ('levels'" in err and len(err.splitlines()) == 1


def test_records_of_another_kind_or_a_damaged_part_are_named(pair, tmp_path):
    """Another Parquet table copied over requests.parquet was read as a run with no requests: ``analyze``
    wrote "no request was measured" over a good summary, and ``compare`` named the merged file for a
    damaged part file. Each is now one line naming the file, exit 2, and the folder is left as it was."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, base, same, _ = pair
    other = tmp_path / "other"
    shutil.copytree(same, other)
    pq.write_table(pa.table({"wall": [1.0], "name": ["vllm:num_requests_running"], "value": [1.0]}),
                   other / "requests.parquet")
    before = (other / "summary.json").read_bytes()
    code, _, err = cli("analyze", str(other))
    assert code == 2 and f"{other / 'requests.parquet'}: not a loadtest records file (no column 'request_id'" in err
    assert (other / "summary.json").read_bytes() == before
    assert cli("compare", str(base), str(other))[0] == 2
    parts = tmp_path / "parts"
    shutil.copytree(same, parts)
    (parts / "requests.parts").mkdir()
    (parts / "requests.parquet").rename(parts / "requests.parts" / "part-0000.parquet")
    (parts / "requests.parts" / "part-0001.parquet").write_bytes(b"PAR1x")
    code, _, err = cli("compare", str(base), str(parts))
    assert code == 2 and f"candidate {parts / 'requests.parts' / 'part-0001.parquet'}: not a readable Parquet" in err


def test_analyze_goes_on_without_unreadable_server_metrics_and_names_a_bad_slo_in_run_json(pair, tmp_path):
    """A damaged server_metrics.parquet was a traceback (the requests, the measurement, were never judged);
    a bad limit in run.json's scenario was a line that did not say which file holds it."""
    _, _, same, _ = pair
    run = tmp_path / "run"
    shutil.copytree(same, run)
    (run / "server_metrics.parquet").write_bytes(b"")
    code, out, err = cli("analyze", str(run))
    assert code == 0 and "Traceback" not in err, err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["levels"] and any("server_metrics.parquet) could not be read" in w for w in summary["warnings"])
    meta = json.loads((run / "run.json").read_text())
    meta["scenario"]["slo"] = {"itl_ms": {"p95": -1}}
    (run / "run.json").write_text(json.dumps(meta))
    code, _, err = cli("analyze", str(run))
    assert code == 2 and f"{run / 'run.json'}: scenario.slo.itl_ms.p95" in err


def test_analyze_names_a_summary_it_cannot_replace_and_leaves_no_temporary(pair, tmp_path):
    """A folder where summary.json should be: the line named summary.json.tmp and left it behind."""
    _, _, same, _ = pair
    run = tmp_path / "run"
    shutil.copytree(same, run)
    (run / "summary.json").unlink()
    (run / "summary.json").mkdir()
    code, _, err = cli("analyze", str(run))
    assert code == 2 and f"{run / 'summary.json'}: is a directory" in err, err
    assert ".tmp" not in err and not (run / "summary.json.tmp").exists()


def test_new_summaries_carry_the_fingerprint(pair):
    _, base, _, _ = pair
    summary = json.loads((base / "summary.json").read_text())
    assert summary["fingerprint"]["levels"] == [1, 2, 4] and summary["fingerprint"]["hash"]


def test_history_names_a_run_it_skips_for_want_of_a_summary_or_records(pair, tmp_path):
    """A run folder with a run.json but neither summary.json nor readable records was left out
    without a word (the CHANGELOG promised one line)."""
    root, base, _, _ = pair
    empty = tmp_path / "runs" / "empty"
    empty.mkdir(parents=True)
    shutil.copy(base / "run.json", empty / "run.json")
    code, _, err = cli("history", str(root), str(tmp_path / "runs"), "--html", str(tmp_path / "h.html"))
    assert code == 0, err
    assert f"loadtest history: skipped {empty}: no records" in err, err


def test_history_says_why_a_run_was_not_compared_with_the_previous_one(pair, tmp_path):
    """The table's ``vs_previous`` said "error" and nothing said which error."""
    root, base, same, _ = pair
    runs = tmp_path / "runs"
    shutil.copytree(base, runs / "a")
    shutil.copytree(same, runs / "b")
    (runs / "b" / "requests.parquet").write_bytes(b"")
    code, out, err = cli("history", str(runs), "--html", str(tmp_path / "h.html"))
    assert code == 0, err
    assert f"b: not compared with the previous run: candidate {runs / 'b' / 'requests.parquet'}: not a readable" in out


def test_run_refuses_gate_flags_without_a_baseline_and_a_missing_baseline(tmp_path):
    scenario = str(Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml")
    code, _, err = cli("run", scenario, "--junit", str(tmp_path / "j.xml"), "--out", str(tmp_path / "run"))
    assert code == 2 and "--junit" in err and "--baseline" in err
    code, _, err = cli("run", scenario, "--baseline", str(tmp_path / "nowhere"), "--out", str(tmp_path / "run"))
    assert code == 2 and "no such run folder" in err
    assert not (tmp_path / "run").exists()  # refused before anything was started


def test_a_bare_summary_of_rate_levels_is_refused_beside_a_closed_loop(pair, tmp_path):
    """A summary.json alone (records not kept) says its mode by its levels' rate_rps and speedup; rate levels
    and users are not one axis (tests/unit/test_compare_rates.py judges rate runs against each other)."""
    _, base, same, _ = pair
    summary = json.loads((base / "summary.json").read_text())
    for i, level in enumerate(summary["levels"]):
        level["concurrency"], level["rate_rps"], level["speedup"] = 0, 2.0 * (i + 1), None
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    code, _, err = cli("compare", str(tmp_path / "summary.json"), str(same))
    assert code == 2 and f"baseline {tmp_path / 'summary.json'} is an open-loop run (load.rates)" in err, err


def test_run_with_a_closed_loop_baseline_refuses_a_rate_scenario_before_any_load(pair, tmp_path):
    scenario = tmp_path / "rates.yaml"
    scenario.write_text(json.dumps({**scenario_dict(), "load": {"rates": [2, 4], "level_duration_s": 10, "warmup_s": 1}}))
    code, _, err = cli("run", str(scenario), "--baseline", str(pair[1]), "--out", str(tmp_path / "run"))
    assert code == 2 and f"the run of {scenario} would be an open-loop run (load.rates)" in err, err
    assert not (tmp_path / "run").exists()  # refused before anything was started


def test_a_history_of_links_to_run_folders_is_read(pair, tmp_path):
    """A history kept as symbolic links to dated run folders was found empty (``Path.rglob`` does not
    enter a linked folder): the gate then judged without its noise. A link back to an ancestor must
    not loop, and a run reached twice counts once."""
    root, base, same, _ = pair
    links = tmp_path / "links"
    links.mkdir()
    for run in sorted((root / EARLIER).iterdir()):
        (links / run.name).symlink_to(run, target_is_directory=True)
    (links / "again").symlink_to(root / EARLIER, target_is_directory=True)  # the same runs by another path
    (links / "loop").symlink_to(links, target_is_directory=True)
    (links / "broken").symlink_to(tmp_path / "nowhere", target_is_directory=True)
    # a link above the history's folder is not followed: the run beside it is not part of the history
    (links / "up").symlink_to(tmp_path, target_is_directory=True)
    with contextlib.redirect_stdout(io.StringIO()):
        write_run(tmp_path / "beside" / "night-x", seed=30, t0=T0 - 5 * 86_400)
    code, out, _ = cli("compare", str(base), str(same), "--history", str(links), "--json", str(tmp_path / "c.json"))
    assert code == 0, out
    assert json.loads((tmp_path / "c.json").read_text())["history_runs"] == 3  # the baseline and the 2 earlier runs
    # given itself, that run's folder is read
    code, out, _ = cli("compare", str(base), str(same), "--history", str(links), str(tmp_path / "beside"),
                       "--json", str(tmp_path / "c.json"))
    assert json.loads((tmp_path / "c.json").read_text())["history_runs"] == 4, out


def test_run_with_a_baseline_refuses_a_missing_history_before_any_load(pair, tmp_path):
    """A trial: ``run --baseline B --history nofolder`` ran the whole load (the warm-up run too) and only
    then ended "--history nofolder: no such folder", a night without a verdict."""
    scenario = tmp_path / "same.yaml"
    scenario.write_text(json.dumps(scenario_dict()))
    code, _, err = cli("run", str(scenario), "--baseline", str(pair[1]), "--history", str(tmp_path / "nowhere"),
                       "--out", str(tmp_path / "run"))
    assert code == 2 and err.strip() == f"loadtest run: error: --history {tmp_path / 'nowhere'}: no such folder", err
    assert not (tmp_path / "run").exists() and not (tmp_path / "run-warmup").exists()  # refused before anything
