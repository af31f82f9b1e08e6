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
