"""``run --out s3://…`` says "uploaded" only when the bucket holds the run folder, file by file.

Why: in CI the uploader child died mid-run (a folder removed while it listed) and
the run's completed ``run.json`` never reached the bucket; the run's last line
must not say the folder was uploaded then, whatever the child's exit code.
No child is started here: the uploader is a stand-in that reports its exit code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from loadtest.storage import glue, sync


class _Uploader:
    code = 0

    def __init__(self, local: Path, url: str) -> None:
        self.local, self.url = local, url

    def finish(self) -> int:
        return self.code

    def unsent(self) -> list[str]:
        return sync.unsent_files(self.local, self.url)


def _staged(monkeypatch, tmp_path, bucket: dict[str, int], code: int = 0) -> str:
    monkeypatch.setenv("LOADTEST_STAGING_DIR", str(tmp_path / "staging"))
    monkeypatch.setattr(glue.remote, "check_bucket", lambda url: None)
    listings = iter([{}])  # the first listing: the folder is new
    monkeypatch.setattr(glue.remote, "list_files", lambda url: next(listings, bucket))
    monkeypatch.setattr(sync, "Uploader", type("Stand", (_Uploader,), {"code": code}))
    args = argparse.Namespace(out="s3://results/run-1", junit=None, markdown=None, html=None, json=None)
    with glue.staged_run(args, scenario=None) as url:
        assert url == "s3://results/run-1"
        Path(args.out).mkdir(parents=True)
        (Path(args.out) / "run.json").write_text('{"complete": true}')
        (Path(args.out) / "summary.json").write_text("{}")
    return url


def test_every_file_there_at_its_size_is_uploaded(monkeypatch, tmp_path, capsys):
    _staged(monkeypatch, tmp_path, {"run.json": 18, "summary.json": 2})
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("uploaded ") and last.endswith(" to s3://results/run-1")


@pytest.mark.parametrize("bucket, code, named", [
    ({"run.json": 5, "summary.json": 2}, 0, "run.json"),  # an older run.json: the child said 0
    ({"run.json": 18}, 0, "summary.json"),
    ({"run.json": 18, "summary.json": 2}, 1, None),  # the child's last passes failed
])
def test_a_file_missing_or_partial_is_a_warning_that_names_it(monkeypatch, tmp_path, capsys, bucket, code, named):
    _staged(monkeypatch, tmp_path, bucket, code)
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("warning: some files of ") and "could not be uploaded to s3://results/run-1" in last
    assert "the local folder keeps them" in last
    if named:
        assert f"1 missing or partial: {named}" in last
