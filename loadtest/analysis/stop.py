"""A run that was asked to stop early, in words (run.json ``stopped_by``, ``stop_signal``).

Ctrl-C, SIGTERM and the web UI's Stop end the load gracefully: every record is kept
and analyzed. The level in force then is cut short, before a look could decide it,
and may read "uncertain" for want of samples however far it was from its limits.
Its words must blame the stop, not the limits: "longer levels can decide it" was
wrong advice for a level that the user stopped.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from loadtest.analysis.results import LevelResult

def stop_words(run: Mapping[str, Any]) -> str | None:
    """What stopped the run, for a sentence ("an interrupt (SIGINT)", "SIGTERM", "the web UI's Stop"),
    or None when it was not asked to stop (complete, killed, a full disk, an older run.json)."""
    by = run.get("stopped_by")
    if by == "web_ui":
        return "the web UI's Stop"
    if by != "signal":
        return None
    name = run.get("stop_signal")
    if name == "SIGINT":
        return "an interrupt (SIGINT)"
    return str(name) if name else "a signal"


def mark_cut_short(levels: Sequence[LevelResult], run: Mapping[str, Any]) -> None:
    """Mark the levels (and their classes) that the stop ended before the load stage decided them.

    A level that ended by itself has ``decision.ended`` (decided, at its duration or undecided at
    its last look); the one in force when the stop came has none.
    """
    words = stop_words(run)
    if words is None:
        return
    for level in levels:
        if not level.decision.get("ended"):
            level.cut_short_by = words
            for part in level.classes.values():
                part.cut_short_by = words


def no_load(run: Mapping[str, Any]) -> str | None:
    """Why a run folder holds no load, when its run.json says: its preflight failed, or a stop
    (Ctrl-C, SIGTERM, the web UI's Stop) came before its first level. None otherwise.

    ``analyze`` and ``history`` give this reason rather than "no records".
    """
    if run.get("stopped_by") == "preflight":
        return f"the run stopped at its preflight, before any load ({run.get('stop_error') or 'no reason kept'})"
    words = stop_words(run)
    if words is not None and not run.get("levels"):
        return f"{words} stopped the run before its first level (in its preflight or warm-up): no load was measured"
    return None


def incomplete_words(run: Mapping[str, Any]) -> str:
    """Why the run is partial, as far as run.json can tell.

    A run that stops on its own (Ctrl-C, SIGTERM, the web UI's Stop, a full disk) writes its end
    and who stopped it into run.json; one that was killed (SIGKILL, the OOM killer, a crash) never
    does, and lost what it had not yet flushed: up to a second of records. The analysis warns with
    it, and the gate of a comparison whose baseline or candidate did not complete.
    """
    stopped = run.get("stopped_by")
    if stopped == "preflight":
        return f"the run stopped at its preflight, before any load: {run.get('stop_error') or 'the target failed'}"
    if stopped == "disk_full":
        return ("the run did not complete: it was stopped because its folder could not be written (disk full); "
                "the records flushed before are kept, its last level is partial")
    if run.get("ended_wall") is None:
        return ("the run did not complete: it was killed or crashed (run.json has no end time); the records of "
                "its last second or so and the requests then in flight are missing, and its last level is partial")
    words = stop_words(run)
    if words is not None:
        levels = run.get("levels") or []
        last = levels[-1] if levels else None
        if last is None:
            return f"the run did not complete: {words} stopped it before its first level"
        if not (last.get("decision") or {}).get("ended"):
            ran = max(0.0, float(last.get("end_wall") or 0.0) - float(last.get("start_wall") or 0.0))
            return (f"the run did not complete: {words} stopped it {ran:.1f} s into its last level, which was "
                    "cut short before it could be decided; every record measured until then is kept")
        return (f"the run did not complete: {words} stopped it after its last level had ended; any "
                "levels still to come were not run, and every record measured until then is kept")
    # an older run.json, which did not record who stopped the run (Ctrl-C, SIGTERM or the web UI's Stop)
    return ("the run did not complete: it was stopped early (Ctrl-C, SIGTERM or the web UI's Stop; this run.json "
            "does not say which), and its last level may be partial")
