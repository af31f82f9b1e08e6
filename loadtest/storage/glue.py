"""The commands' side of remote paths: stage what they write, download what they read.

Each command keeps working on local folders; these context managers swap an
``s3://`` argument for a local folder before the command runs and upload what it
wrote afterwards. Used by ``run`` (``--out``, ``--baseline``, the gate's outputs),
``analyze``, ``compare`` and ``history``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from loadtest import staged_paths
from loadtest.errors import InputError
from loadtest.run_files import COMPARE_JSON, REPORT_HTML, RUN_JSON, SUMMARY_JSON
from loadtest.storage import remote
from loadtest.storage.remote import RemotePath, as_remote

GATE_OUTPUTS = ("junit", "markdown", "html", "json")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


#: Inputs read for their runs' summaries only: a gate's history gives the reference runs' values
#: (run.json for the fingerprint and start, summary.json for the values, compare.json for a run its
#: own gate rejected: compare/reference.rejected), so a nightly prefix of many runs is not downloaded
#: with its records.
SUMMARIES_ONLY = {"history": (RUN_JSON, SUMMARY_JSON, COMPARE_JSON)}
#: The files whose presence alone a command's inputs are read for (``compare --history``, ``history DIR``),
#: stood for by an empty file: a run's own folder holds
#: its report.html, a baseline promoted from it does not (compare/history.one_row_per_run keeps the own
#: folder's name; over s3:// the promoted night read "baseline").
PRESENCE_ONLY = {"history": (REPORT_HTML,), "dirs": (REPORT_HTML,)}


def _fetch(url: RemotePath, into: Path, only: tuple[str, ...] | None = None, marks: tuple[str, ...] = ()) -> Path:
    """Download a run folder, a summary.json or a tree of run folders; the local path that stands for it."""
    local = into / url.replace("://", "/", 1).rstrip("/")
    if url.endswith(".json"):
        local.parent.mkdir(parents=True, exist_ok=True)
        if not remote.exists(url):
            raise InputError(f"{url}: no such run folder or summary.json")
        local.write_bytes(remote.read_bytes(url))
        return local
    if not remote.download_tree(url, local, only=only, marks=marks):
        raise InputError(f"{url}: no such run folder (nothing under it)")
    return local


def _values(args: argparse.Namespace, name: str) -> list:
    """The values an argument holds, as a list (``history`` takes several; the rest one, or None)."""
    value = getattr(args, name, None)
    return [v for v in (value if isinstance(value, list) else [value]) if v is not None]


@contextmanager
def remote_io(args: argparse.Namespace, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = (),
              write_back: tuple[str, ...] = ()) -> Iterator[None]:
    """Swap the ``s3://`` values of ``args`` for local copies for the length of the block.

    ``inputs``: downloaded first (a value may be a list, as ``history``'s folders are).
    ``outputs``: files the command writes, uploaded after it. ``write_back``: an input
    whose new and changed files are uploaded back (``analyze`` writes its reports into the run folder).
    """
    if not any(as_remote(v) for name in (*inputs, *write_back, *outputs) for v in _values(args, name)):
        # Nothing remote: no folder. A worker that ends with os._exit (its master lost) or is
        # killed would otherwise leave an empty one in /tmp on every start.
        yield
        return
    tmp = Path(tempfile.mkdtemp(prefix="loadtest-s3-"))
    uploads: list[tuple[Path, RemotePath]] = []
    shown_as: list[tuple[Path, RemotePath]] = []  # what is printed or written names the URL, not the copy
    try:
        for name in (*inputs, *write_back):
            value = getattr(args, name, None)
            values = _values(args, name)
            local = [_fetch(url, tmp / "in", SUMMARIES_ONLY.get(name), PRESENCE_ONLY.get(name, ()))
                     if (url := as_remote(v)) else v for v in values]
            if any(as_remote(v) for v in values):
                setattr(args, name, local if isinstance(value, list) else local[0])
                copies = [(path, url) for path, url in zip(local, map(as_remote, values)) if url]
                shown_as += copies
                if name in write_back:
                    uploads += copies
        before = {p: p.stat().st_mtime_ns for d, _ in uploads for p in d.rglob("*") if p.is_file()}
        for name in outputs:
            url = as_remote(getattr(args, name, None))
            if url is not None:
                _refuse_a_missing_bucket(url)  # before the work: a missing bucket failed only at the upload
                local = tmp / "out" / url.name
                local.parent.mkdir(parents=True, exist_ok=True)
                setattr(args, name, local)
                uploads.append((local, url))
                shown_as.append((local, url))
        for local, url in shown_as:
            staged_paths.stand_in(local, url)
        yield
    finally:
        for local, _ in shown_as:
            staged_paths.release(local)
        failed = sys.exc_info()[0] is not None
        try:
            if not failed:
                for local, url in uploads:
                    if local.is_file():
                        remote.upload_file(local, url)
                    elif local.is_dir():
                        for p in sorted(q for q in local.rglob("*") if q.is_file()):
                            if before.get(p) != p.stat().st_mtime_ns:
                                remote.upload_file(p, url.join(p.relative_to(local).as_posix()))
                    else:
                        continue
                    _say(f"uploaded to {url}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _refuse_a_missing_bucket(url: RemotePath) -> None:
    """An output's bucket that is not there, refused before the work; any other trouble is the upload's to
    report (credentials that may write objects but not read the bucket's metadata must still work)."""
    try:
        remote.check_bucket(url)
    except remote.StorageError as err:
        if "no such bucket" in str(err):
            raise


@contextmanager
def staged_run(args: argparse.Namespace, scenario, reports_dir: Path = Path("reports")) -> Iterator[RemotePath | None]:
    """``run --out s3://…``: the run folder is written locally and uploaded as it grows.

    ``s3://bucket/prefix/`` (a trailing slash) puts a new folder ``<name>-<UTC time>`` under
    the prefix, as a local run does under ``reports/``; without one the URL is the run folder.
    The local copy goes to ``$LOADTEST_STAGING_DIR`` (default ``reports/``). The gate's outputs
    that name a file in the remote folder are written into the local one and uploaded with it.
    """
    url = as_remote(args.out)
    if url is None:
        yield None
        return
    # the pipeline module and the uploader: only when --out is a bucket URL (the CLI imports this module at start-up)
    from loadtest.run import default_run_dir
    from loadtest.storage.sync import Uploader

    run_url = url.join(default_run_dir(scenario, Path()).name) if url.is_prefix else url
    remote.check_bucket(run_url)
    if remote.list_files(run_url):  # also the check that the bucket and the credentials work: before any load
        raise InputError(f"--out {run_url}: the folder exists and is not empty; choose another")
    local = Path(os.environ.get("LOADTEST_STAGING_DIR") or reports_dir) / run_url.name
    args.out = local
    for name in GATE_OUTPUTS:
        out = as_remote(getattr(args, name, None))
        if out is not None and out.startswith(run_url.rstrip("/") + "/"):
            setattr(args, name, local / out[len(run_url.rstrip("/")) + 1:])
    _say(f"the run folder {local} is uploaded to {run_url} as it grows")
    uploader = Uploader(local, run_url)
    # what the gate prints and writes (compare.json, uploaded into the bucket) names the run by its URL, as
    # it names an s3:// baseline: the staged folder is lost with a CronJob's pod
    warm_local, warm_url = local.with_name(local.name + "-warmup"), RemotePath(run_url.rstrip("/") + "-warmup")
    stand_ins = [(local, run_url), (warm_local, warm_url)]
    for path, where in stand_ins:
        staged_paths.stand_in(path, where)
    try:
        yield run_url
    finally:
        for path, _ in stand_ins:
            staged_paths.release(path)
        _finish_upload(uploader, local, run_url)
        # The warm-up run of run --baseline (repeats.plan: "<out>-warmup", a sibling of the staged
        # folder) goes up beside the run, as gate.md says it is kept: it stayed in the local staging
        # folder, which in a CronJob's pod is lost with the pod.
        if warm_local.is_dir() and any(warm_local.iterdir()):
            _finish_upload(Uploader(warm_local, warm_url), warm_local, warm_url)


def _finish_upload(uploader, local: Path, url: RemotePath) -> None:
    """Wait for the uploader's last pass, then say what reached the bucket: all of ``local``, or a
    warning naming what is missing or partial (the local folder keeps it)."""
    code = uploader.finish()
    try:
        unsent = uploader.unsent() if local.is_dir() else []
    except remote.StorageError as err:
        unsent = [f"(the bucket could not be listed: {err})"]
    if code != 0 or unsent:
        missing = f" ({len(unsent)} missing or partial: {', '.join(unsent[:3])}{', …' if len(unsent) > 3 else ''})" if unsent else ""
        _say(f"warning: some files of {local} could not be uploaded to {url}{missing}; the local folder keeps them")
    elif local.is_dir():
        _say(f"uploaded {local} to {url}")
