"""Reading the runs to compare: a run folder, or a ``summary.json`` (inside one, or alone).

Compare reads run folders and nothing else. With records (``requests.parquet``)
a run is re-analyzed by :mod:`loadtest.analysis`, under the SLO the comparison
uses, so both runs are judged by the same rules and every per-request sample is
at hand for the bootstrap. A bare ``summary.json`` (records not kept) can
still be compared, from its percentiles and intervals, with a warning.

A run's records are read as the analyzer reads them
(:mod:`loadtest.records_stream`): the scalar columns here, once, and the chunk
lists later, a batch at a time, by each pass that needs them
(:meth:`RunInput.chunk_batches`). They were read whole (``read_requests``), so
both runs' chunk timestamps sat in memory as pandas arrays for the whole
comparison: the largest part of its memory for big runs.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import pandas as pd
import pyarrow as pa

from loadtest import paths
from loadtest.compare.level_keys import MODE_OF_UNIT, UNIT_OF_MODE, unit_of
from loadtest.errors import InputError
from loadtest.paths import input_folder, read_text
from loadtest.records_stream import chunk_batches, read_scalars
from loadtest.run_files import PARTS_DIR, REQUESTS_PARQUET, RUN_JSON, SUMMARY_JSON
from loadtest.run_record import LOAD_MODE_WORDS
from loadtest.staged_paths import shown



@dataclass
class RunInput:
    """One side of a comparison, as found on disk."""

    label: str  # what the user passed
    folder: Path | None
    run: dict[str, Any]  # run.json (or the summary's ``run`` block when alone)
    summary: dict[str, Any] | None
    #: The records' scalar columns (every column but the chunk lists); None without records.
    scalars: pd.DataFrame | None = field(default=None, repr=False)
    #: The argument that named this run (``--baseline``, ``candidate``), for error lines.
    arg: str = "run"

    @property
    def has_records(self) -> bool:
        return self.scalars is not None

    def chunk_batches(self) -> Iterator[pa.RecordBatch]:
        """The records' ``chunk_ms`` / ``chunk_tokens``, in record order, a batch at a time (a new read per call).

        A file that cannot be read gives the one-line :class:`InputError` (exit 2)
        that :func:`load_run` gives when the scalar columns cannot be read.
        """
        if self.folder is None or self.scalars is None:
            return
        batches = chunk_batches(self.folder)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except Exception as err:  # a damaged list column: say which file, never a traceback
                raise _unreadable(self.arg, self.folder, err) from None
            yield batch

    @property
    def scenario(self) -> dict[str, Any]:
        scenario = self.run.get("scenario")
        return dict(scenario) if isinstance(scenario, Mapping) else {}

    @property
    def name(self) -> str:
        return run_name(self.run, self.summary)

    @property
    def started_wall(self) -> float | None:
        value = self.run.get("started_wall")
        if value is None and self.summary:
            value = (self.summary.get("run") or {}).get("started_wall")
        return float(value) if value is not None else None

    @property
    def identity(self) -> RunIdentity | None:
        """Which run this is, whichever folder holds it (:func:`run_identity`)."""
        return run_identity(self.run, self.summary)

    @property
    def mode(self) -> str:
        """``closed_loop``, ``open_loop`` or ``trace_replay`` (:func:`load_mode_of`)."""
        return load_mode_of(self.run, self.summary)

    @property
    def unit(self) -> str:
        """What its levels count: ``users``, ``req/s`` or ``×`` (:mod:`loadtest.compare.level_keys`)."""
        return UNIT_OF_MODE.get(self.mode, "users")

    @property
    def model(self) -> str | None:
        target = self.run.get("target") or (self.summary or {}).get("target") or {}
        return target.get("model")

    @property
    def tool_version(self) -> str | None:
        return self.run.get("tool_version") or (self.summary or {}).get("tool_version")


#: Which run a folder holds (:func:`run_identity`): its scenario's name and its start.
RunIdentity = tuple[str, float]


def run_name(run: Mapping[str, Any], summary: Mapping[str, Any] | None = None) -> str:
    """The scenario's name: run.json's ``name``, else the summary's, else run.json's scenario's."""
    scenario = run.get("scenario")
    from_scenario = scenario.get("name") if isinstance(scenario, Mapping) else None
    return str(run.get("name") or (summary or {}).get("name") or from_scenario or "")


def run_identity(run: Mapping[str, Any], summary: Mapping[str, Any] | None = None) -> RunIdentity | None:
    """Which run a folder holds, whichever folder holds it: (:func:`run_name`, its start), the start
    being ``started_wall`` (run.json's, else the summary's ``run`` block) to the microsecond; None
    when neither says when it started (such a run is never taken for another).

    Why not the folder: a nightly's baseline is a copy of a night the history also keeps
    (``baseline promote`` copies run.json byte for byte), and a history may hold other copies of a
    run. Counted as two runs, a copy weighs double in the gate's reference runs, and ``history``
    judged it against itself; both read this one identity. A copy keeps both parts, and no two
    runs start on the same microsecond; the name keeps apart runs of other scenarios made up
    with one start (tests' synthetic runs). run.json holds no other mark of a run that every copy
    keeps: its ``prompt_salt`` is empty without ``workload.cache_bust``, and a bare summary.json
    (a compared side may be one) has none.
    """
    value = run.get("started_wall") or ((summary or {}).get("run") or {}).get("started_wall")
    try:
        start = float(value) if value else None
    except (TypeError, ValueError):  # a hand-edited run.json: no identity, rather than a traceback
        return None
    return (run_name(run, summary), start) if start else None


def copy_words(identity: RunIdentity) -> str:
    """``a copy: 'nightly', started 2026-12-07 01:08:41.123456 UTC``: what makes two folders one run."""
    when = datetime.fromtimestamp(identity[1], timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    return f"a copy: {identity[0]!r}, started {when}"


def find_runs(dirs: Iterable[Path], arg: str = "DIR") -> list[Path]:
    """Every run folder (one holding run.json) under ``dirs``, each once; ``arg`` names them in errors."""
    found: set[Path] = set()
    for root in dirs:
        root = input_folder(root, arg)
        found.update(folder.resolve() for folder in _folders_with_run_json(root))  # the root itself too
    return sorted(found)


def _folders_with_run_json(root: Path) -> Iterator[Path]:
    """The folders under ``root`` that hold a run.json, following links to folders.

    Why not ``Path.rglob``: it does not descend into a symbolic link to a folder, and a history
    kept as links to dated run folders (``history/night-3 -> ../runs/2026-12-03``) is a usual
    layout; ``--history`` then found none of them, and the gate judged without its noise. Each
    real folder (device and inode) is walked once, so a link back into the tree cannot loop, and a
    link to the root or above it is not followed: it would walk everything there (``rglob`` never
    left the root). A broken link is skipped, as before.
    """
    top = root.resolve()
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        try:
            st = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirnames[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirnames[:] = [d for d in dirnames if not _links_above(os.path.join(dirpath, d), top)]
        if RUN_JSON in filenames:
            yield Path(dirpath)


def _links_above(path: str, top: Path) -> bool:
    """Whether ``path`` is a link to ``top`` or to a folder above it."""
    if not os.path.islink(path):
        return False
    try:
        target = Path(path).resolve(strict=True)
    except OSError:  # broken, or a loop of links
        return True
    return top.is_relative_to(target)


def load_run(path: Path | str, *, records: bool = True, arg: str = "") -> RunInput:
    """Read a run folder or a summary.json; :class:`InputError` (exit 2) when it is neither.

    ``arg`` names the argument in every message (``--baseline``, ``baseline``);
    the checks themselves are :mod:`loadtest.paths`' so each mistake is one line.
    """
    path = Path(path)
    label = shown(path)  # an s3:// run by its URL, not the temporary copy read
    arg = arg or "run"
    if path.is_file() and path.name != RUN_JSON:
        summary = _read_json(path, arg)
        folder = path.parent if (path.parent / RUN_JSON).is_file() else None
        if folder is None:
            run = dict(summary.get("run") or {})
            run.setdefault("name", summary.get("name"))
            run.setdefault("target", summary.get("target"))
            run.setdefault("tool_version", summary.get("tool_version"))
            if records:
                _require_levels(summary, path, arg)
            return RunInput(label, None, run, summary)
        path = folder
    elif path.is_file():
        path = path.parent
    run = paths.read_run_json(path, arg)
    summary = _read_json(path / SUMMARY_JSON, arg) if (path / SUMMARY_JSON).is_file() else None
    frame = None
    if records and ((path / REQUESTS_PARQUET).exists() or any((path / PARTS_DIR).glob("*.parquet"))):
        paths.run_records(path, arg)  # each file's footer and columns: one line naming the damaged file
        try:
            frame = read_scalars(path)  # the chunk lists: RunInput.chunk_batches, a batch at a time
        except Exception as err:  # a damaged parquet file: say which, never a traceback
            raise _unreadable(arg, path, err) from None
    if frame is None and summary is None:
        raise InputError(f"{arg} {label}: the run folder has neither records nor a summary.json")
    if frame is None and records:  # the comparison will judge this run from its summary alone
        _require_levels(summary, path / SUMMARY_JSON, arg)
    return RunInput(label, path, run, summary, frame, arg)


def _require_levels(summary: Mapping[str, Any], where: Path, arg: str) -> None:
    """A summary compared without records must say what each level measured.

    Without ``levels`` (a summary cut by hand or by another tool) only the capacity would be
    compared, and a gutted run would pass the gate as "no regression".
    """
    levels = summary.get("levels")
    if not isinstance(levels, list) or not all(isinstance(lv, Mapping) for lv in levels):
        raise InputError(f"{arg} {where}: not a loadtest summary ('levels' must be a list of levels, got "
                         f"{json.dumps(levels)[:40]}), and there are no records to judge the run from instead")


def _unreadable(arg: str, folder: Path, err: Exception) -> InputError:
    return InputError(f"{arg} {folder / REQUESTS_PARQUET}: cannot read the records ({err})")


def _read_json(path: Path, arg: str) -> dict[str, Any]:
    text = read_text(path, arg)
    try:
        data = json.loads(text)
    except ValueError as err:
        raise InputError(f"{arg} {path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise InputError(f"{arg} {path}: expected a JSON object")
    return data


# -- the load mode of a run -----------------------------------------------------------------------


def load_mode_of(run: Mapping[str, Any], summary: Mapping[str, Any] | None) -> str:
    """``closed_loop``, ``open_loop`` or ``trace_replay``: what the summary's levels are (the levels
    the gate compares: a speedup, a rate, or users), else run.json's ``load_mode`` (which reading
    run.json fills in, ``closed_loop`` when absent: a run.json written before the key existed, on
    the first day of the open loop, says nothing, and its levels still carry their rates)."""
    levels = [lv for lv in (summary or {}).get("levels") or [] if isinstance(lv, Mapping)]
    if levels:
        return MODE_OF_UNIT[unit_of(levels)]
    return str(run.get("load_mode") or "closed_loop")


def mode_words(mode: str) -> str:
    """``a closed-loop run (load.levels)``, ``an open-loop run (load.rates)``, ``a trace replay (load.speedups)``."""
    return LOAD_MODE_WORDS.get(mode, f"a run of load mode {mode!r}")
