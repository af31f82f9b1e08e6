"""The upload mirror (``loadtest.storage.sync``) outlives the run's own changes to its folder.

Why: CI once lost a nightly gate's baseline this way. The run merged and removed
``server_metrics.parts/`` while the mirror listed the folder; ``Path.rglob``
raised ``FileNotFoundError`` for the folder that had gone, the mirror's child
died mid-run, and the run's completed ``run.json`` never reached the bucket, so
``baseline promote`` refused the run as interrupted.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from loadtest.storage import sync


def _run_folder(root: Path) -> Path:
    run = root / "run"
    (run / "requests.parts").mkdir(parents=True)
    (run / "server_metrics.parts").mkdir()
    (run / "run.json").write_text("{}")
    (run / "requests.parts" / "part-000.parquet").write_bytes(b"p")
    (run / "server_metrics.parts" / "part-000.parquet").write_bytes(b"s")
    (run / "report.html.tmp").write_text("being written")
    return run


def _uploads_into(monkeypatch: pytest.MonkeyPatch, dest: Path, fail_first: int = 0) -> list[str]:
    """``remote.upload_file``/``delete`` as copies into ``dest``; the first ``fail_first`` uploads raise."""
    calls: list[str] = []

    def upload(local: Path, url: str) -> None:
        calls.append(url)
        if len(calls) <= fail_first:
            raise RuntimeError("an error no pass expected")
        target = dest / url.split("/run/", 1)[1]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(local).read_bytes())

    monkeypatch.setattr(sync.remote, "upload_file", upload)
    monkeypatch.setattr(sync.remote, "delete", lambda url: (dest / url.split("/run/", 1)[1]).unlink())
    return calls


def test_a_folder_removed_while_it_is_listed_is_skipped(monkeypatch, tmp_path):
    run = _run_folder(tmp_path)
    real_scandir = os.scandir

    def scandir_after_the_merge(path=None):
        # The run's merge removes the parts folder after the listing saw it, before it is scanned.
        if isinstance(path, (str, os.PathLike)) and Path(path).name == "server_metrics.parts":
            shutil.rmtree(path)  # (rmtree itself scans by descriptor: an int, passed through)
        return real_scandir(path) if path is not None else real_scandir()

    monkeypatch.setattr(os, "scandir", scandir_after_the_merge)
    files = sync.local_files(run)
    assert sorted(files) == ["requests.parts/part-000.parquet", "run.json"]
    assert files["run.json"][0] == 2  # size, then mtime


def test_a_pass_that_fails_is_one_line_and_the_next_pass_uploads_everything(monkeypatch, tmp_path, capsys):
    run = _run_folder(tmp_path)
    dest = tmp_path / "bucket"
    _uploads_into(monkeypatch, dest, fail_first=1)
    mirror = sync.Mirror(run, "s3://b/run")
    mirror.sync_safely()  # must not raise: a dead mirror uploads nothing more
    assert mirror.errors == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "RuntimeError: an error no pass expected" in err and str(run) in err
    mirror.sync_safely()
    assert mirror.errors == 1
    uploaded = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert uploaded == ["requests.parts/part-000.parquet", "run.json", "server_metrics.parts/part-000.parquet"]
    # The merge removes the parts locally: the next pass removes them remotely, and sends the change.
    shutil.rmtree(run / "server_metrics.parts")
    (run / "run.json").write_text('{"completed": true}')
    mirror.sync_safely()
    assert not (dest / "server_metrics.parts" / "part-000.parquet").exists()
    assert (dest / "run.json").read_text() == '{"completed": true}'


def test_the_run_says_uploaded_only_when_the_bucket_holds_every_file_at_its_size(monkeypatch, tmp_path):
    run = _run_folder(tmp_path)
    held = {"run.json": 2, "requests.parts/part-000.parquet": 1, "server_metrics.parts/part-000.parquet": 1}
    monkeypatch.setattr(sync.remote, "list_files", lambda url: dict(held))
    assert sync.unsent_files(run, "s3://b/run") == []  # the .tmp file is not the mirror's business
    held["run.json"] = 1  # an older, shorter run.json: the completed one never arrived
    del held["requests.parts/part-000.parquet"]
    assert sync.unsent_files(run, "s3://b/run") == ["requests.parts/part-000.parquet", "run.json"]
