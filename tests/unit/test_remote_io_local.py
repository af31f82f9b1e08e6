"""``remote_io`` with nothing remote makes no folder: it wraps every run, analyze and compare.

Why: a worker that ends with ``os._exit`` (its master lost) or is killed never
reaches the block's cleanup, and each start used to leave an empty
``loadtest-s3-*`` folder in /tmp (38 of them after two runs of the suite).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import pytest

from loadtest.storage import glue


def _made(monkeypatch) -> list[str]:
    made: list[str] = []
    real = tempfile.mkdtemp

    def counting(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(glue.tempfile, "mkdtemp", counting)
    return made


def test_local_paths_make_no_folder_and_stay_as_they_are(monkeypatch, tmp_path):
    made = _made(monkeypatch)
    args = argparse.Namespace(run_dir=tmp_path / "run", history=[str(tmp_path / "a"), str(tmp_path / "b")], json=None)
    with glue.remote_io(args, inputs=("history",), outputs=("json",), write_back=("run_dir",)):
        assert made == []
    assert made == [] and args.run_dir == tmp_path / "run" and args.history == [str(tmp_path / "a"), str(tmp_path / "b")]


def test_a_remote_output_gets_its_folder_and_it_is_removed(monkeypatch, tmp_path):
    made = _made(monkeypatch)
    monkeypatch.setattr(glue.remote, "upload_file", lambda local, url: None)
    checked: list[str] = []  # the bucket is checked before the work (no S3 here: recorded, not asked)
    monkeypatch.setattr(glue.remote, "check_bucket", checked.append)
    args = argparse.Namespace(json="s3://bucket/verdict.json")
    with glue.remote_io(args, outputs=("json",)):
        assert len(made) == 1 and str(args.json).startswith(made[0])
    assert not any(os.path.exists(m) for m in made)
    assert checked == ["s3://bucket/verdict.json"]


def test_a_failing_block_with_nothing_remote_still_raises(monkeypatch):
    _made(monkeypatch)
    with pytest.raises(RuntimeError):
        with glue.remote_io(argparse.Namespace(run_dir="x"), write_back=("run_dir",)):
            raise RuntimeError("boom")
