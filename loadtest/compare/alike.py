"""Like with like: what makes two runs comparable at all, and the one line that refuses them (exit 2).

* one load mode (:func:`require_same_mode`): levels of users, of offered rates, or of trace
  speedups are matched by their own key (:mod:`level_keys`), and no level of one is a level of
  another;
* one workload (:func:`require_same_workload`: the fingerprints of :mod:`loadtest.fingerprint`);
* two runs, not one run twice (:func:`refuse_the_same_run`);
* rate runs with a level in common (:func:`require_a_common_level`).

:mod:`engine` asks these of the pair, :mod:`groups` of every other run of a group, and
``run --baseline`` of the baseline before any load.
"""

from __future__ import annotations

from typing import Any, Mapping

from loadtest.compare.inputs import RunInput, copy_words, mode_words
from loadtest.compare.level_keys import USERS, load_list
from loadtest.compare.summary_values import levels_by_key
from loadtest.errors import InputError
from loadtest.fingerprint import differences, fingerprint_of_run


class IncomparableRuns(InputError):
    """The runs did not run the same workload (exit 2)."""


def require_same_mode(first: tuple[RunInput, str], other: tuple[RunInput, str]) -> None:
    """:class:`IncomparableRuns` (exit 2, one line naming both paths) unless both runs are of one load mode.

    Why: a closed loop's levels are concurrent users, an open loop's offered rates, a trace replay's
    speedups; no level of one is a level of another, and their capacities are counted in other
    units. (Each run is given with the argument that named it: ``baseline``, ``--also-candidate``.)
    """
    (a, arg_a), (b, arg_b) = first, other
    if a.mode != b.mode:
        raise IncomparableRuns(f"incomparable runs: {arg_a} {a.label} is {mode_words(a.mode)} and {arg_b} {b.label} "
                               f"is {mode_words(b.mode)}; compare runs of one load mode")


def require_a_common_level(unit: str, *sides: tuple[str, Mapping[str, Any] | None]) -> None:
    """:class:`IncomparableRuns` (exit 2, one line naming both paths) when rate runs share no level.

    ``sides``: each run's argument and path (``baseline runs/a``) and its summary (as judged), in
    ``unit`` (:mod:`level_keys`). Rate runs are matched by their nominal rates: with none in common,
    nothing but the capacity would be compared, and "no regression" would be said of levels never
    judged (what the gate did with every open loop, when all its levels read "0 users"). A closed
    loop keeps its old answer (its capacity, the levels listed as measured by one run only).
    """
    keys = [set(levels_by_key(summary)) for _, summary in sides]
    if unit == USERS or set.intersection(*keys):
        return
    measured = [f"{where} measured {load_list(sorted(k), unit) if k else 'no level'}" for (where, _), k in zip(sides, keys)]
    raise IncomparableRuns(f"incomparable runs: no level in common ({'; '.join(measured)})")


def refuse_the_same_run(base: RunInput, cand: RunInput, args: tuple[str, str]) -> None:
    """:class:`InputError` when both paths are one run (the same folder, or a folder and its summary.json).

    Why refuse rather than compare: a run compared with itself passes every check, so a nightly
    job whose candidate path points back at its baseline (a variable left unset, a promotion run
    twice) would report "No regression" every night without measuring anything. A copy of the
    baseline elsewhere is the same run too (:func:`inputs.run_identity`).
    """
    same_folder = base.folder is not None and cand.folder is not None and base.folder.resolve() == cand.folder.resolve()
    if same_folder or base.label == cand.label:
        raise InputError(f"{args[1]} {cand.label} is the same run as {args[0]} {base.label}: "
                         f"compare a new run with its baseline")
    if base.identity is not None and base.identity == cand.identity:  # a copy (baseline promote copies run.json)
        raise InputError(f"{args[1]} {cand.label} is the same run as {args[0]} {base.label} ({copy_words(base.identity)}): "
                         f"compare a new run with its baseline")


def side_fingerprint(side: RunInput, which: str) -> dict[str, Any]:
    """A run's workload fingerprint; :class:`IncomparableRuns` when nothing says what it ran."""
    if not side.scenario and not side.run.get("compare_fingerprint") and not side.run.get("workload_fingerprint") and not (side.summary or {}).get("fingerprint"):
        raise IncomparableRuns(
            f"incomparable runs: the {which} ({side.label}) says nothing about its workload "
            "(no run.json scenario and no fingerprint in summary.json)"
        )
    return fingerprint_of_run(side.run, side.summary)


def require_same_workload(fp_b: Mapping[str, Any], fp_c: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse (exit 2, one line naming every difference) unless the fingerprints match."""
    diff = differences(fp_b, fp_c)
    if diff:
        raise IncomparableRuns(f"{prefix}incomparable runs, the workload differs: " + "; ".join(diff))
