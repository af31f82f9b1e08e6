"""``loadtest run --repeat K [--warmup-run]``: one job, several runs of the scenario, each in its own folder.

One run says little about a server that moves from run to run; K runs of the
same scenario let ``compare`` gate on the difference between groups (see
:mod:`loadtest.compare.groups`). A *warm-up run* first (on by default for gate
runs, ``--baseline``) takes the first-run effects (a cold cache, lazy
compilation, a CPU still at low frequency) out of the measured ones; it is a
full run, kept in its own folder and marked ``"warmup_run": true`` in run.json
so that ``compare --history`` and ``history`` never count it.

Folders, from ``--out DIR`` (or the default ``reports/<name>-<stamp>``):

* one run, no warm-up: ``DIR`` itself, as before;
* one run after a warm-up: ``DIR`` for the run, ``DIR-warmup`` for the warm-up;
* K > 1 runs: ``DIR/warmup`` (if any) and ``DIR/run-01`` … ``DIR/run-K``; the
  comparison's outputs go to ``DIR``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadtest.errors import InputError

#: An upper bound: a job is bounded in time, and a typo (``--repeat 100``) must not keep a server busy for days.
MAX_REPEAT = 50


@dataclass(frozen=True)
class PlannedRun:
    folder: Path
    warmup: bool


def plan(out: Path, repeat: int, warmup: bool) -> tuple[list[PlannedRun], Path]:
    """The runs to make, in order, and the folder the comparison's outputs go to."""
    if not 1 <= repeat <= MAX_REPEAT:
        raise InputError(f"--repeat {repeat}: expected 1 to {MAX_REPEAT} runs")
    if repeat == 1:
        runs = [PlannedRun(out.with_name(out.name + "-warmup"), True)] if warmup else []
        return runs + [PlannedRun(out, False)], out
    if out.exists() and any(out.iterdir()):
        raise InputError(f"--out {out}: the folder exists and is not empty; choose another")
    width = max(2, len(str(repeat)))
    runs = [PlannedRun(out / "warmup", True)] if warmup else []
    runs += [PlannedRun(out / f"run-{i:0{width}d}", False) for i in range(1, repeat + 1)]
    return runs, out


def warmup_default(explicit: bool | None, gated: bool, web: bool) -> bool:
    """``--warmup-run`` as given, else on for gate runs (not with the web UI, which waits for a click)."""
    if explicit is not None:
        return explicit
    return gated and not web
