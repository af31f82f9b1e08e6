"""``loadtest baseline exists``: 0 only for a baseline the gate can read, 1 for none, 2 for a broken one.

A baseline folder whose run.json (or summary.json) could not be read was said to exist (exit 0):
the nightly gate then compared every night with it and failed, or, had it taken the folder for
none, would have run without the gate and promoted over it. ``exists`` now makes the checks
``promote`` makes of a run's run.json and summary.json, and says which file in one line. Real
folders and files, the command in-process.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from loadtest.cli import main


def _exists(folder: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["baseline", "exists", str(folder)])
    return code, err.getvalue()


def _baseline(folder: Path, run: str = '{"complete": true}', summary: str | None = '{"levels": []}') -> Path:
    folder.mkdir()
    (folder / "run.json").write_text(run)
    if summary is not None:
        (folder / "summary.json").write_text(summary)
    return folder


def test_a_readable_baseline_exists_and_no_run_json_is_none(tmp_path):
    assert _exists(_baseline(tmp_path / "good")) == (0, "")
    assert _exists(tmp_path / "missing") == (1, "")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "summary.json").write_text("{")  # no run.json: no baseline, whatever else lies there
    assert _exists(tmp_path / "empty") == (1, "")


@pytest.mark.parametrize("run, summary, file, says", [
    ('{"complete": tr', '{"levels": []}', "run.json", "not valid JSON"),
    ("[1, 2]", '{"levels": []}', "run.json", "expected a JSON object"),
    (b"\xff\xfe\x00", '{"levels": []}', "run.json", "not valid JSON"),
    ('{"complete": true}', '{"format": 1, "name": ', "summary.json", "not valid JSON"),
    ('{"complete": true}', '{"capacity": {"concurrency": 4}}', "summary.json", "not a loadtest summary (no 'levels')"),
])
def test_a_baseline_whose_run_json_or_summary_cannot_be_read_is_exit_2_naming_the_file(tmp_path, run, summary, file, says):
    folder = tmp_path / "baseline"
    _baseline(folder, summary=summary)
    if isinstance(run, bytes):
        (folder / "run.json").write_bytes(run)
    else:
        (folder / "run.json").write_text(run)
    code, err = _exists(folder)
    assert code == 2, err
    assert f"{folder}/{file}: {says}" in err and "promote a good run over it" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in folder.iterdir()) == ["run.json", "summary.json"]  # left as it was


def _one_line(err: str, *said: str) -> None:
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for words in said:
        assert words in err, err


def test_a_run_json_without_a_summary_is_not_a_baseline(tmp_path):
    """A promote or an upload cut short: exists said 0, then ``run --baseline`` refused the folder
    (exit 2) and ``promote`` would not have made it. Now exists says so first, exit 2."""
    folder = _baseline(tmp_path / "nosum", summary=None)
    (folder / "requests.parquet").write_bytes(b"")
    code, err = _exists(folder)
    assert code == 2
    _one_line(err, f"{folder}: no summary.json beside its run.json", "promote a good run over it")


def test_a_file_where_the_baseline_folder_should_be_is_exit_2(tmp_path):
    """Not "no baseline" (1): the night would run without the gate, then promote onto the path."""
    summary = tmp_path / "summary.json"
    summary.write_text('{"levels": []}')
    code, err = _exists(summary)
    assert code == 2
    _one_line(err, f"{summary}: is a file, expected a folder")


@pytest.mark.parametrize("argv", [["baseline", "exists", ""], ["baseline", "exists", "  "],
                                  ["baseline", "promote", "RUN", ""], ["baseline", "promote", "", "BASE"]])
def test_an_empty_path_is_refused_and_nothing_is_written(tmp_path, monkeypatch, argv):
    """``"$BASELINE"`` unset: exists said "no baseline" (1), and promote wrote the baseline into the
    current folder, exit 0."""
    run = _baseline(tmp_path / "night")
    (run / "requests.parquet").write_bytes(b"")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    argv = [str(run) if a == "RUN" else str(tmp_path / "baseline") if a == "BASE" else a for a in argv]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    _one_line(err.getvalue(), "must not be empty (an unset variable?)")
    assert list(cwd.iterdir()) == [] and not (tmp_path / "baseline").exists()


def test_no_baseline_is_said_on_stdout_as_well_as_by_exit_1(tmp_path):
    """Run by hand, ``exists`` on a missing folder exited 1 and printed nothing (trial F)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["baseline", "exists", str(tmp_path / "missing")]) == 1
    assert out.getvalue().startswith(f"no baseline at {tmp_path / 'missing'} (no run.json)"), out.getvalue()
