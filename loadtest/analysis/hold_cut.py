"""A measured request that outlived its level's hold is cut at the hold's end.

The load stage holds each level's load until the requests it measured have
finished (``load/hold.py``), for at most a cap. A request still running at the
cap then ran on at the next level's load: its remaining tokens, its TPOT and
its e2e would be the next level's, booked at this one. So the analysis cuts it
where the hold ended, as the harness would have: it becomes a ``cancelled``
(censored) record with what it had streamed by then (its chunks up to the
cut, its TTFT if it had one, its wait so far as e2e). :mod:`frame` then
applies the rules for every cut request: a wait already past a limit is a
certain miss, TPOT is its TPOT so far, anything else is left out.

Runs without holds (older runs, levels that did not hold) are unchanged.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd

from loadtest.analysis.columns import boolean, numeric, text

#: The message a cut record carries.
CUT_MESSAGE = "still running when its level's hold reached its cap; cut there (see load/hold.py)"


def hold_ends(run: Mapping[str, Any]) -> dict[int, float]:
    """Each level's hold end (wall clock), by level index, for the levels that held."""
    out: dict[int, float] = {}
    for level in run.get("levels") or []:
        hold = level.get("hold") if isinstance(level, Mapping) else None
        if isinstance(hold, Mapping) and hold.get("end_wall") is not None and level.get("index") is not None:
            out[int(level["index"])] = float(hold["end_wall"])
    return out


def _level_ends(run: Mapping[str, Any]) -> dict[int, float]:
    """Each level's end (wall clock; where its hold began), by level index."""
    out: dict[int, float] = {}
    for level in run.get("levels") or []:
        if isinstance(level, Mapping) and level.get("end_wall") is not None and level.get("index") is not None:
            out[int(level["index"])] = float(level["end_wall"])
    return out


def cut_at_hold_end(requests: pd.DataFrame, run: Mapping[str, Any], *, lists: bool = True) -> pd.DataFrame:
    """``requests`` with every request that ended after its level's hold cut at that end (a copy if any).

    ``lists=False`` leaves the chunk lists as they are: the caller cuts them
    where it reads them (:meth:`chunk_lists.ListBatch.cut`, with
    :func:`hold_cut_ms`), the streaming analysis of a run on disk.
    """
    cut_ms = hold_cut_ms(requests, run)
    if cut_ms is None:
        return requests
    out = requests.copy()
    for name in ("e2e_ms", "ttft_ms", "ttfb_ms", "completion_tokens"):
        if name in out.columns:
            out[name] = numeric(out, name)
    for name in ("error_kind", "error"):
        if name in out.columns:
            out[name] = out[name].astype(object)
    for row in np.flatnonzero(np.isfinite(cut_ms)):
        _cut_row(out, row, float(cut_ms[row]), lists=lists)
    return out


def hold_cut_ms(requests: pd.DataFrame, run: Mapping[str, Any]) -> np.ndarray | None:
    """Per request, where it is cut (ms after its send; NaN: not cut); None when none is."""
    ends = hold_ends(run)
    if not ends or not len(requests):
        return None
    index = numeric(requests, "level_index")
    sent = numeric(requests, "start_wall")
    e2e = numeric(requests, "e2e_ms")
    ok = boolean(requests, "ok")
    kinds = text(requests, "error_kind")
    cut_wall = np.full(len(requests), np.nan)
    level_end = np.full(len(requests), np.inf)
    ended = _level_ends(run)
    for level, end in ends.items():
        cut_wall[index == level] = end
        level_end[index == level] = ended.get(level, np.inf)
    # Only requests sent before the level ended (the hold began). One sent during the hold
    # is measured nowhere; cutting it would only take the tokens it streamed on into the
    # next level's window away from that window's throughput, which counts every chunk that
    # arrived in it.
    late = np.isfinite(cut_wall) & (sent < cut_wall) & (sent < level_end) & (sent + e2e / 1000.0 > cut_wall + 1e-6)
    late &= ~(~ok & (kinds == "cancelled") & (sent + e2e / 1000.0 <= cut_wall + 1e-6))
    if not late.any():
        return None
    out = np.full(len(requests), np.nan)
    out[late] = (cut_wall[late] - sent[late]) * 1000.0
    return out


def _cut_row(frame: pd.DataFrame, row: int, at_ms: float, *, lists: bool = True) -> None:
    """Make row ``row`` (positional) a request cancelled ``at_ms`` after it was sent."""
    columns = frame.columns
    pos = frame.index[row]
    if lists and "chunk_ms" in columns:
        times = np.asarray(frame.at[pos, "chunk_ms"] if frame.at[pos, "chunk_ms"] is not None else [], dtype=float)
        keep = times <= at_ms
        frame.at[pos, "chunk_ms"] = times[keep].tolist()
        if "chunk_tokens" in columns and frame.at[pos, "chunk_tokens"] is not None:
            tokens = np.asarray(frame.at[pos, "chunk_tokens"], dtype=float)
            frame.at[pos, "chunk_tokens"] = tokens[: len(keep)][keep[: len(tokens)]].astype(int).tolist()
    for name in ("ttft_ms", "ttfb_ms"):
        if name in columns:
            value = frame.at[pos, name]
            if value is not None and not pd.isna(value) and float(value) > at_ms:
                frame.at[pos, name] = np.nan
    frame.at[pos, "e2e_ms"] = at_ms
    frame.at[pos, "ok"] = False
    frame.at[pos, "error_kind"] = "cancelled"
    if "error" in columns:
        frame.at[pos, "error"] = CUT_MESSAGE
    if "completion_tokens" in columns:
        frame.at[pos, "completion_tokens"] = np.nan  # the frame counts what it streamed
