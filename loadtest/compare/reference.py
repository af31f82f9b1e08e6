"""The runs a gate over groups reads: both groups, and the reference runs that give the run-to-run noise.

The reference runs are the baselines plus every run of the same workload fingerprint found under
``--history``: complete, not a warm-up run, made before the candidates, not one of the compared
runs (nor a copy of one: :func:`inputs.run_identity`), the newest :data:`noise.MAX_REFERENCE_RUNS`.
:mod:`groups` judges each check against them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from loadtest.compare import noise
from loadtest.compare.alike import side_fingerprint
from loadtest.compare.inputs import (RUN_JSON, SUMMARY_JSON, RunIdentity, RunInput, copy_words, find_runs, load_run,
                                     run_identity)
from loadtest.errors import InputError
from loadtest.fingerprint import fingerprint_of_run
from loadtest.run_files import COMPARE_JSON
from loadtest.run_record import normalized
from loadtest.staged_paths import shown


@dataclass
class RunGroups:
    """Both groups' runs as read (path, side) and the reference runs (folder, summary), the first baseline's first."""

    base: list[tuple[Path, RunInput]]
    cand: list[tuple[Path, RunInput]]
    fp_hash: str | None
    reference: list[tuple[str, dict[str, Any]]]
    history_folders: int  # run folders found under --history, of any workload
    #: History runs of this workload left out because their own gate found a regression (:func:`rejected`).
    rejected: list[str] = field(default_factory=list)


class _HistoryRun(NamedTuple):
    folder: str
    summary: dict[str, Any]
    started: float
    identity: RunIdentity | None  # what makes two copies of one run the same run


def read_groups(baselines: Sequence[Path | str], candidates: Sequence[Path | str], history: Sequence[Path | str],
                args: tuple[str, str], fp_hash: str | None = None) -> RunGroups:
    """Read every run of both groups, and the history's runs of the first baseline's fingerprint
    (``fp_hash``: the comparison's, once it is known). ``args`` name the two sides in messages."""
    base = [_summary_side(p, args[0] if i == 0 else "--also-baseline") for i, p in enumerate(baselines)]
    cand = [_summary_side(p, args[1] if i == 0 else "--also-candidate") for i, p in enumerate(candidates)]
    if fp_hash is None:
        fp_hash = side_fingerprint(base[0][1], "baseline").get("hash")
    return RunGroups(base, cand, fp_hash, *_reference(fp_hash, base[0][1].summary or {}, base, cand, history))


def rejected(folder: Path, identity: RunIdentity | None) -> bool:
    """True when the gate that judged this run as its candidate found a regression: a compare.json
    (in the run folder; with ``--repeat``, in the folder holding the runs) that says ``outcome:
    regression`` and whose candidate is this run (``identity``: :func:`inputs.run_identity`), or names
    it among its candidates (``--repeat``: the folder's name under the same parent).

    Why such a run is no reference run: the reference runs stand for the healthy server's run-to-run
    noise. A night the gate rejected stays in the nightly's results, and counted as noise it widened the
    band so far (±1000-2600% from one slow night among four) that the next night's real slowdown of
    13-27% passed and was promoted as the baseline. A rejected run the user accepts becomes the
    baseline by ``baseline promote``, and the runs after it are its noise. A compare.json that judged
    another run (``compare night-3 exp --json night-3/compare.json``) says nothing of this one.
    """
    for place in (folder / COMPARE_JSON, folder.parent / COMPARE_JSON):
        try:
            verdict = json.loads(place.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(verdict, dict) or verdict.get("outcome") != "regression":
            continue
        candidate = verdict.get("candidate") if isinstance(verdict.get("candidate"), dict) else {}
        if identity is not None and candidate.get("name") == identity[0] \
                and abs(float(candidate.get("started_wall") or 0.0) - identity[1]) < 1e-6:
            return True
        if place.parent == folder.parent and any(
                Path(str(c)).name == folder.name and Path(str(c)).parent.name == folder.parent.name
                for c in verdict.get("candidates") or []):
            return True
    return False


def refuse_a_run_given_twice(groups: RunGroups) -> None:
    """One run on both sides, or twice on one, is refused (exit 2), whichever folders hold it
    (:func:`inputs.run_identity`: a copy is the same run).

    The first baseline and candidate are the pair's (:func:`alike.refuse_the_same_run`); this is
    for the ``--also-*`` runs: a run among both groups makes them share a member, and one given
    twice on a side weighs double in its group's mean.
    """
    seen: dict[RunIdentity, tuple[str, str]] = {}  # identity -> (the argument and path, the folder)
    for path, side in groups.base + groups.cand:
        identity = side.identity
        if identity is None:
            continue
        if identity in seen:
            first, folder = seen[identity]
            how = "the same folder" if folder == _key(path) else copy_words(identity)
            raise InputError(f"{side.arg} {path} is the same run as {first} ({how}): give each run once")
        seen[identity] = (f"{side.arg} {path}", _key(path))


def _summary_side(path: Path | str, which: str) -> tuple[Path, RunInput]:
    side = load_run(path, records=False, arg=which)
    if side.summary is None:
        raise InputError(f"{which} {path}: no summary.json (run `loadtest analyze {path}` first)")
    return Path(path), side


def _reference(fp_hash: str | None, first_summary: dict[str, Any], base: list[tuple[Path, RunInput]],
               cand: list[tuple[Path, RunInput]], history: Sequence[Path | str]
               ) -> tuple[list[tuple[str, dict[str, Any]]], int, list[str]]:
    """(folder, summary) of every reference run: the baselines (the first's as ``first_summary``),
    then the history's runs of the fingerprint ``fp_hash``; how many run folders the history holds;
    and the history's runs of this workload left out as :func:`rejected`."""
    seen = {_key(p) for p, _ in base}
    exclude = {_key(p) for p, _ in cand}
    before = min((s.started_wall for _, s in cand if s.started_wall is not None), default=math.inf)
    # a copy of a compared run elsewhere (a nightly's baseline committed from a night the history
    # also keeps), or a second copy of a history run, is that run (run_identity): it would count twice
    runs_in: set[RunIdentity | None] = {s.identity for _, s in base + cand} - {None}
    out = [(str(p), (s.summary or {}) if i else first_summary) for i, (p, s) in enumerate(base)]
    found: list[_HistoryRun] = []
    left_out: list[str] = []
    folders = find_runs([Path(h) for h in history], "--history") if history else []
    for folder in folders:
        key = _key(folder)
        if key in seen or key in exclude:
            continue
        seen.add(key)
        run = _history_run(folder, fp_hash)
        if run is not None and run.started < before and (run.identity is None or run.identity not in runs_in):
            runs_in.add(run.identity)
            if rejected(folder, run.identity):
                left_out.append(shown(folder))
                continue
            found.append(run)
    found.sort(key=lambda r: r.started)
    room = max(0, noise.MAX_REFERENCE_RUNS - len(out))
    found = found[len(found) - room:] if room else []  # the newest
    return out + [(r.folder, r.summary) for r in found], len(folders), left_out


def _history_run(folder: Path, fp_hash: str | None) -> _HistoryRun | None:
    """A history run of the same fingerprint, complete and not a warm-up run; None otherwise."""
    try:
        run = normalized(json.loads((folder / RUN_JSON).read_text(encoding="utf-8")))  # through the run record
        summary = json.loads((folder / SUMMARY_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # a half-written or damaged folder is not part of the history
    if run.get("warmup_run") or run.get("complete") is False:
        return None
    if fingerprint_of_run(run, summary).get("hash") != fp_hash:
        return None
    started = run.get("started_wall") or (summary.get("run") or {}).get("started_wall") or 0.0
    return _HistoryRun(str(folder), summary, float(started), run_identity(run, summary))


def _key(path: Path | str) -> str:
    p = Path(path)
    p = p.parent if p.is_file() else p
    return str(p.resolve())
