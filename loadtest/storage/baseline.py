"""``loadtest baseline exists|promote``: the nightly gate's last accepted run, local or ``s3://``.

The gate compares each night with the baseline and moves the baseline forward
only on a pass. ``promote`` copies what a comparison needs (``run.json``,
``summary.json``, ``requests.parquet`` and the other Parquet files) from a run
folder to the baseline's place, replacing the old baseline; ``run.json`` is
removed first and written last, so a promote cut short never leaves something
that ``exists`` takes for a baseline.

Everything that could refuse is checked before the first file is removed: the
run folder and the baseline are not the same folder and neither holds the
other (a promote would delete the run it copies), the baseline holds nothing a
promote did not write (it deletes what it replaces: a wrong path must not
empty someone's folder), and every Parquet file of the run has a readable
footer (a truncated copy must not replace a good baseline).

A baseline is one run. ``promote`` of a ``run --repeat K`` folder (``run-01`` …
``run-K``, no run.json of its own) promotes the group's median run
(:func:`loadtest.repeats.representative`) and says which, so the nightly job works
unchanged with ``--repeat``; every run of the group must have completed and been
analyzed. ``exists`` calls such a folder no baseline the gate can read (exit 2).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from loadtest.errors import InputError
from loadtest.repeats import group_runs, representative
from loadtest.run_files import PARTS_DIR, REPORT_HTML, REQUESTS_PARQUET, RUN_JSON, SUMMARY_JSON
from loadtest.run_record import normalized
from loadtest.storage import remote
from loadtest.storage.remote import RemotePath, as_remote, path_arg



def add_arguments(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("baseline", help="the nightly gate's baseline: does it exist, move it forward")
    verbs = p.add_subparsers(dest="baseline_command", required=True, metavar="VERB")
    e = verbs.add_parser("exists", help="exit 0 if DIR holds a baseline (run.json and summary.json), 1 if it holds "
                                        "no run.json, 2 if it is not a baseline the gate can read (one line says why)")
    e.add_argument("dir", type=_folder_arg, metavar="DIR", help="baseline folder, local or s3://bucket/prefix/baseline")
    e.set_defaults(func=_cmd_exists)
    m = verbs.add_parser("promote", help="make a finished run the baseline (replacing the old one); of a "
                                         "--repeat folder, the group's median run")
    m.add_argument("run_dir", type=_folder_arg, metavar="RUN_DIR",
                   help="the run folder that passed the gate, or the folder of a --repeat group")
    m.add_argument("baseline", type=_folder_arg, metavar="BASELINE", help="the baseline folder to replace")
    m.set_defaults(func=_cmd_promote)


def _folder_arg(text: str) -> Path | RemotePath:
    """argparse type: a folder, never the empty string.

    ``"$BASELINE"`` with the variable unset is ``""``, which a Path reads as the current folder:
    ``exists ""`` said "no baseline" (exit 1) and the night that followed ran without the gate,
    then ``promote RUN ""`` made the job's working folder the baseline.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty (an unset variable?); got {text!r}")
    return path_arg(text)


#: What a run or ``analyze`` writes into a run folder beside what a promote copies: a baseline that
#: was analyzed again (``analyze s3://…/baseline --slo …`` writes its report back) or copied
#: whole from a run folder holds these, and a promote replaces them with the rest.
_RUN_FOLDER_FILES = frozenset({REPORT_HTML, "autoscaling.yaml", "scraper.log", "locust.log"})


def _promoted(rel: str) -> bool:
    """A file a promote writes (or its temporary), or one a run folder holds: one a later promote may replace."""
    name = rel[:-len(".tmp")] if rel.endswith(".tmp") else rel
    return (name in (RUN_JSON, SUMMARY_JSON) or (name.endswith(".parquet") and "/" not in name)
            or name.startswith(("requests.parts/", "server_metrics.parts/")) or name in _RUN_FOLDER_FILES
            or _worker_log(name))


def _worker_log(name: str) -> bool:
    """``worker-N.log``: a distributed run's worker logs."""
    stem = name[len("worker-"):-len(".log")] if name.startswith("worker-") and name.endswith(".log") else ""
    return stem.isdigit()


class _Folder:
    """A local or remote folder, for the few operations a promote needs."""

    def __init__(self, where: Path | str) -> None:
        self.url = as_remote(where)
        self.path = None if self.url else Path(where)

    def __str__(self) -> str:
        return str(self.url or self.path)

    def sub(self, name: str) -> "_Folder":
        """The folder ``name`` inside this one."""
        return _Folder(self.url.join(name) if self.url else self.path / name)

    def files(self) -> list[str]:
        if self.url:
            return sorted(remote.list_files(self.url))
        if not self.path.is_dir():
            return []
        return sorted(p.relative_to(self.path).as_posix() for p in self.path.rglob("*") if p.is_file())

    def read(self, rel: str) -> bytes:
        return remote.read_bytes(self.url.join(rel)) if self.url else (self.path / rel).read_bytes()

    def write(self, rel: str, data: bytes) -> None:
        if self.url:
            remote.write_bytes(self.url.join(rel), data)
            return
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)

    def overlaps(self, other: "_Folder") -> bool:
        """The same folder, or one inside the other."""
        if bool(self.url) != bool(other.url):
            return False
        if self.url:
            a, b = self.url.rstrip("/") + "/", other.url.rstrip("/") + "/"
            return a.startswith(b) or b.startswith(a)
        a, b = self.path.resolve(), other.path.resolve()
        return a == b or a in b.parents or b in a.parents

    def check_parquet(self, rel: str) -> None:
        """Refuse a Parquet file whose footer cannot be read (truncated, not Parquet, unreadable)."""
        # pyarrow.parquet: only a promote reads Parquet here
        import pyarrow.parquet as pq

        try:
            if self.url:
                remote.read_parquet_footer(self.url.join(rel))
            else:
                pq.read_metadata(self.path / rel)
        except (OSError, ValueError) as err:  # ArrowInvalid is a ValueError
            detail = " ".join(str(err).split()) or type(err).__name__
            raise InputError(f"{self}/{rel}: not a readable Parquet file ({detail}); not promoted") from None

    def remove(self, rel: str) -> None:
        if self.url:
            remote.delete(self.url.join(rel))
        else:
            (self.path / rel).unlink(missing_ok=True)


def _json_object(folder: _Folder, rel: str, outcome: str) -> dict:
    """``rel`` in ``folder`` as a JSON object, or one line saying it is not one (and ``outcome``)."""
    try:
        data = json.loads(folder.read(rel))
    except (ValueError, UnicodeDecodeError) as err:
        raise InputError(f"{folder}/{rel}: not valid JSON ({err}); {outcome}") from None
    if not isinstance(data, dict):
        raise InputError(f"{folder}/{rel}: expected a JSON object; {outcome}")
    return data


def _check_summary(folder: _Folder, outcome: str) -> None:
    """The folder's summary.json is one the gate can compare with: a JSON object with its ``levels``."""
    if not isinstance(_json_object(folder, SUMMARY_JSON, outcome).get("levels"), list):
        raise InputError(f"{folder}/summary.json: not a loadtest summary (no 'levels'); {outcome}")


#: Why ``exists`` refuses a baseline it cannot read, and what mends it.
_UNUSABLE = "not a baseline the gate can compare with (promote a good run over it)"


def _cmd_exists(args: argparse.Namespace) -> int:
    """0: a baseline; 1: none (no run.json); 2 (:class:`InputError`): not a baseline the gate can read.

    A bucket that is not there (or that the credentials may not see) is 2 as well, one line naming it.

    2 is a file where the folder should be, a run.json or summary.json that cannot be read, or no
    summary.json at all: the checks ``promote`` makes of a run before it becomes the baseline, and
    what ``run --baseline`` refuses before its load; and a ``--repeat`` folder (a group of runs,
    which ``run --baseline`` refuses too: a baseline is one run). A nightly gate that took such a folder for a
    baseline failed every night; one that took it for no baseline would run without the gate and
    promote over it.
    """
    folder = _Folder(args.dir)
    if folder.path is not None and folder.path.is_file():  # not "no baseline": a wrong path
        raise InputError(f"{folder}: is a file, expected a folder (the baseline's run folder)")
    files = folder.files()
    if RUN_JSON not in files:
        if runs := group_runs(files):  # "no baseline" would run the night ungated, then promote over the group
            raise InputError(f"{folder}: a --repeat folder ({', '.join(runs)}), not a baseline (one run) the gate can "
                             f"compare with; `loadtest baseline promote {folder} BASELINE` makes its median run one")
        if folder.url:  # a mistyped bucket is a wrong path, not "no baseline" (a night would run ungated)
            remote.check_bucket(folder.url)
        # said, not only exited: run by hand, a bare exit 1 read as nothing having happened (trial F)
        print(f"no baseline at {folder} (no {RUN_JSON}); `loadtest baseline promote RUN_DIR {folder}` makes one")
        return 1
    _json_object(folder, RUN_JSON, _UNUSABLE)
    if SUMMARY_JSON not in files:  # a promote or an upload cut short: promote and run --baseline refuse it
        raise InputError(f"{folder}: no summary.json beside its run.json; {_UNUSABLE}")
    _check_summary(folder, _UNUSABLE)
    return 0


def _cmd_promote(args: argparse.Namespace) -> int:
    src, dst = _Folder(args.run_dir), _Folder(args.baseline)
    if src.overlaps(dst):
        raise InputError(f"baseline promote: RUN_DIR {src} and BASELINE {dst} are the same folder or one holds "
                         "the other; a promote replaces the baseline's files, so it would delete the run")
    files = src.files()
    why = ""
    if RUN_JSON not in files:
        runs = group_runs(files)
        if not runs:
            raise InputError(f"{src}: not a run folder (no {RUN_JSON})")
        src, why = _group_representative(src, runs, files)
        files = src.files()
    run = normalized(_json_object(src, RUN_JSON, "not promoted"))
    if not run.get("complete"):
        raise InputError(f"{src}: the run did not complete; an interrupted run is never a baseline")
    if SUMMARY_JSON not in files:
        raise InputError(f"{src}: no summary.json (the run was not analyzed)")
    # every later night compares against these files: a baseline its gate cannot read fails them all
    _check_summary(src, "not promoted")
    if REQUESTS_PARQUET not in files and not any(f.startswith(f"{PARTS_DIR}/") for f in files):
        raise InputError(f"{src}: no records (requests.parquet); a baseline is judged from its records; not promoted")
    keep = [f for f in files if f == SUMMARY_JSON or (f.endswith(".parquet") and "/" not in f)]
    if REQUESTS_PARQUET not in keep:
        keep += [f for f in files if f.startswith("requests.parts/")]  # a run whose merge failed: its parts
    old = dst.files()
    foreign = [rel for rel in old if not _promoted(rel)]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise InputError(f"baseline promote: BASELINE {dst} holds files a promote did not write ({shown}); "
                         "it replaces a baseline's files, so give an empty or baseline folder")
    for rel in keep:
        if rel.endswith(".parquet"):
            src.check_parquet(rel)
    if RUN_JSON in old:
        dst.remove(RUN_JSON)
    for rel in old:
        if rel != RUN_JSON and rel not in keep:
            dst.remove(rel)
    for rel in keep:
        dst.write(rel, src.read(rel))
    dst.write(RUN_JSON, src.read(RUN_JSON))
    print(f"baseline {dst} is now {src}" + (f": {why}" if why else ""))
    return 0


def _group_representative(group: _Folder, runs: list[str], files: list[str]) -> tuple[_Folder, str]:
    """The run of a ``--repeat`` folder to promote, and why it (see :func:`loadtest.repeats.representative`).

    Every run of the group must have completed and been analyzed: the gate judged the group whole,
    and a group cut short is no more a baseline than a run cut short is."""
    summaries = []
    for name in runs:
        run = group.sub(name)
        if not normalized(_json_object(run, RUN_JSON, "not promoted")).get("complete"):
            raise InputError(f"{run}: the run did not complete; a group with an interrupted run is never a baseline; "
                             "not promoted")
        if f"{name}/{SUMMARY_JSON}" not in files:
            raise InputError(f"{run}: no summary.json (the run was not analyzed); not promoted")
        summaries.append(_json_object(run, SUMMARY_JSON, "not promoted"))
    pick = representative(summaries, runs)
    return group.sub(runs[pick.index]), f"the median run of the group of {len(runs)} ({pick.why})"
