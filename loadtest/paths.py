"""One check for every path the tool is given, so that every mistake is one line.

Each path argument (the scenario, ``--out``, the run folders of ``analyze``,
``compare`` and ``history``, ``--baseline``, datasets, CA bundles and the
``--junit`` / ``--markdown`` / ``--html`` / ``--json`` outputs) goes through one
of these functions before it is used. Checking the class of mistake here, rather
than catching ``NotADirectoryError`` where it happens to surface, is what keeps
the next new argument from bringing back a traceback: a file where a folder is
expected and the reverse, a missing path, a dangling symlink, no permission, an
empty or non-UTF-8 file, a folder that is not a run folder, a run folder of
another format.

Every problem is an :class:`~loadtest.errors.InputError` (exit code 2) whose
text starts with the argument's name and the path as given, e.g.
``--out reports/x: is a file, expected a folder``. Outputs are checked before
any load is sent, so a typo in ``--junit`` does not cost an hour of load.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from loadtest.errors import InputError
from loadtest.repeats import group_runs_in
from loadtest.run_files import PARTS_DIR, REQUESTS_PARQUET, RUN_JSON
from loadtest.run_record import RUN_FORMAT as RUN_RECORD_FORMAT, normalized

#: The run.json ``format`` this loadtest writes, and the oldest it still reads.
RUN_FORMAT = RUN_RECORD_FORMAT  # (the run record's: loadtest/run_record.py)
#: Keys without which no run.json can be analyzed (present in every format so far).
_RUN_KEYS = ("scenario", "levels")


class PathError(InputError):
    """A path argument that cannot be used; ``problem`` is the text without the argument and path."""

    def __init__(self, arg: str, path: Path | str, problem: str) -> None:
        super().__init__(f"{arg} {path}: {problem}" if arg else f"{path}: {problem}")
        self.arg, self.path, self.problem = arg, str(path), problem


def _fail(arg: str, path: Path | str, problem: str) -> PathError:
    return PathError(arg, path, problem)


def yaml_file_problem(path: str, *, kind: str = "file") -> str | None:
    """For a scenario validator: what is wrong with the file at ``path`` (``"no such file: PATH"``), or None.

    The validator's error is prefixed with its YAML path (``target.ca_bundle``), so
    the line names both the field and the file.
    """
    try:
        input_file(path, "", kind=kind)
    except PathError as err:
        return f"{err.problem}: {path}"
    return None


def _why(err: OSError) -> str:
    return (err.strerror or str(err)).lower()


def _exists(path: Path, arg: str, kind: str) -> None:
    """Missing, or a symlink to nothing: say which."""
    if path.exists():
        return
    if path.is_symlink():
        raise _fail(arg, path, f"a dangling symlink (to {os.readlink(path)}), expected a {kind}")
    raise _fail(arg, path, f"no such {kind}")


def input_file(path: Path | str, arg: str, *, kind: str = "file", allow_empty: bool = False) -> Path:
    """A regular file that this process can read and that is not empty (``kind`` names it: "scenario file")."""
    path = Path(path)
    _exists(path, arg, kind)
    if path.is_dir():
        raise _fail(arg, path, "is a folder, expected a file")
    if not path.is_file():
        raise _fail(arg, path, "is not a regular file")
    try:
        with path.open("rb") as f:
            first = f.read(1)
    except OSError as err:
        raise _fail(arg, path, f"cannot read: {_why(err)}") from None
    if not first and not allow_empty:
        raise _fail(arg, path, "the file is empty")
    return path


def read_text(path: Path | str, arg: str, *, kind: str = "file", allow_empty: bool = False) -> str:
    """The file's text, checked by :func:`input_file` and decoded as UTF-8."""
    path = input_file(path, arg, kind=kind, allow_empty=allow_empty)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise _fail(arg, path, f"cannot read: {_why(err)}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _fail(arg, path, f"not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None
    if not text.strip() and not allow_empty:
        raise _fail(arg, path, "the file is empty (only white space)")
    return text


def input_folder(path: Path | str, arg: str, *, kind: str = "folder") -> Path:
    """An existing folder whose entries this process can list."""
    path = Path(path)
    _exists(path, arg, kind)
    if not path.is_dir():
        raise _fail(arg, path, "is a file, expected a folder")
    try:
        next(os.scandir(path), None)
    except OSError as err:
        raise _fail(arg, path, f"cannot list the folder: {_why(err)}") from None
    return path


def read_run_json(folder: Path | str, arg: str) -> dict[str, Any]:
    """The run.json of a run folder, checked for its format; one line for any problem.

    A ``format`` above :data:`RUN_FORMAT` was written by a newer loadtest and is
    refused rather than half-read; a run.json without ``format`` (written before
    it was stamped) is read if it has what the analysis needs.
    """
    folder = input_folder(folder, arg, kind="run folder")
    run_json = folder / RUN_JSON
    if not run_json.exists() and not run_json.is_symlink():
        if runs := group_runs_in(folder):  # run --repeat's folder: say so, and what to give instead
            raise _fail(arg, folder, f"not a run folder (no run.json) but a --repeat folder holding {', '.join(runs)}: "
                                     f"give one of them ({folder}/{runs[0]})")
        raise _fail(arg, folder, "not a run folder (no run.json)")
    text = read_text(run_json, arg)
    try:
        run = json.loads(text)
    except ValueError as err:
        raise _fail(arg, run_json, f"not valid JSON ({err})") from None
    if not isinstance(run, dict):
        raise _fail(arg, run_json, "expected a JSON object")
    fmt = run.get("format")
    if fmt is not None and (not isinstance(fmt, int) or isinstance(fmt, bool)):
        raise _fail(arg, run_json, f"'format' must be an integer, got {fmt!r}")
    if isinstance(fmt, int) and fmt > RUN_FORMAT:
        raise _fail(arg, folder, f"written by a newer loadtest (run format {fmt}; this one reads format {RUN_FORMAT} "
                                 f"and older): upgrade loadtest ({run.get('tool_version') or 'version unknown'} wrote it)")
    missing = [k for k in _RUN_KEYS if k not in run]
    if missing:
        made = f"run format {fmt}" if fmt is not None else "no run format"
        raise _fail(arg, folder, f"run.json lacks {', '.join(missing)} ({made}: written by an older or another tool); "
                                 "it cannot be analyzed")
    for key, kind, ok in (("scenario", "an object", isinstance(run["scenario"], dict)),
                          ("levels", "a list of objects",
                           isinstance(run["levels"], list) and all(isinstance(v, dict) for v in run["levels"]))):
        if not ok:
            raise _fail(arg, run_json, f"'{key}' must be {kind}, got {json.dumps(run[key])[:60]}; "
                                       "the file was changed by hand or by another tool")
    return normalized(run)


def run_records(folder: Path | str, arg: str) -> list[Path]:
    """The record files of a run folder, each with a readable Parquet footer; one line for any problem.

    ``requests.parquet``, or the part files of a run killed before they were
    merged. A folder with neither has nothing to analyze: ``analyze`` must say so
    rather than write a summary with no levels over the one it had.
    """
    # pyarrow.parquet: only the commands that read records import it (records.py too, for the same reason)
    import pyarrow.parquet as pq

    from loadtest.records import REQUIRED_COLUMNS

    folder = Path(folder)
    merged = folder / REQUESTS_PARQUET
    files = [merged] if merged.exists() or merged.is_symlink() else sorted((folder / PARTS_DIR).glob("*.parquet"))
    if not files:
        raise _fail(arg, folder, "no records (neither requests.parquet nor requests.parts/*.parquet): "
                                 "nothing to analyze; the folder is left as it is")
    for path in files:
        try:
            names = pq.read_schema(path).names
        except OSError as err:
            raise _fail(arg, path, f"cannot read the records: {_why(err)}") from None
        except ValueError as err:  # ArrowInvalid: truncated, or not Parquet
            raise _fail(arg, path, f"not a readable Parquet file ({' '.join(str(err).split())})") from None
        missing = [name for name in REQUIRED_COLUMNS if name not in names]
        if missing:
            raise _fail(arg, path, f"not a loadtest records file (no column {', '.join(map(repr, missing))}); "
                                   "nothing to analyze; the folder is left as it is")
    return files


def run_folder(path: Path | str, arg: str, *, writable: bool = False) -> Path:
    """A run folder (one holding a readable run.json of a format this loadtest reads).

    ``writable``: ``analyze`` rewrites the folder's reports, so it must be writable too.
    """
    read_run_json(path, arg)
    if writable:
        _probe_writable(Path(path), arg, Path(path))
    return Path(path)


def _nearest_existing(path: Path) -> Path:
    for parent in [path, *path.parents]:
        if parent.exists() or parent.is_symlink():
            return parent
    return Path(".")


def _probe_writable(folder: Path, arg: str, shown: Path) -> None:
    """Create and remove a file in ``folder``: permission bits, a read-only mount, ACLs all answer."""
    try:
        fd, name = tempfile.mkstemp(prefix=".loadtest-probe-", dir=folder)
    except OSError as err:
        raise _fail(arg, shown, f"cannot write in {folder}: {_why(err)}") from None
    os.close(fd)
    os.unlink(name)


def _creatable(path: Path, arg: str, what: str) -> None:
    """``path`` does not exist: can its folders be made, and written in?"""
    base = _nearest_existing(path.parent)
    if base.is_symlink() and not base.exists():
        raise _fail(arg, path, f"{base} is a dangling symlink (to {os.readlink(base)})")
    if not base.is_dir():
        raise _fail(arg, path, f"cannot create the {what}: {base} is a file")
    _probe_writable(base, arg, path)


def output_folder(path: Path | str, arg: str) -> Path:
    """A folder to write a run into: missing (it is made), or existing, empty and writable."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise _fail(arg, path, f"a dangling symlink (to {os.readlink(path)}), expected a folder")
    if path.exists():
        if not path.is_dir():
            raise _fail(arg, path, "is a file, expected a folder")
        try:
            empty = next(os.scandir(path), None) is None
        except OSError as err:
            raise _fail(arg, path, f"cannot list the folder: {_why(err)}") from None
        if not empty:
            raise _fail(arg, path, "the folder exists and is not empty; choose another")
        _probe_writable(path, arg, path)
    else:
        _creatable(path, arg, "folder")
    return path


def output_file(path: Path | str, arg: str) -> Path:
    """A file to (over)write: not a folder, not a dangling symlink, and its folder writable."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise _fail(arg, path, f"a dangling symlink (to {os.readlink(path)}), expected a file to write")
    if path.is_dir():
        raise _fail(arg, path, "is a folder, expected a file to write")
    if path.exists():
        if not path.is_file():
            raise _fail(arg, path, "is not a regular file")
        # The file is replaced through a temporary one beside it: the folder must be writable.
        _probe_writable(path.parent, arg, path)
    else:
        _creatable(path, arg, "file")
    return path


def pem_bundle_problem(path: str) -> str | None:
    """For ``target.ca_bundle``: the file's problem, or that it holds no PEM CA certificate; None if usable."""
    # ssl: only for a ca_bundle; imported before gevent patches the process it draws gevent's warning that ssl was patched late
    import ssl

    problem = yaml_file_problem(path)
    if problem:
        return problem
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, ValueError) as err:
        return f"not a PEM file of CA certificates ({getattr(err, 'reason', None) or err}): {path}"
    except OSError as err:
        return f"cannot read: {_why(err)}: {path}"
    return None
