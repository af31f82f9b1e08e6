"""Which samples belong to which level: the measured window of each level.

A level runs from its ``start_wall`` to its ``end_wall`` (run.json). Its first
``warmup_s`` seconds are not measured: users are still ramping and the server's
queue has not settled. The **measured window** is therefore
``[start_wall + warmup_s, end_wall)``, half-open so that with ``warmup_s = 0``
an instant that ends one level and starts the next belongs to exactly one.

Samples are attached to windows by *when they happened*, not by the level a
request was stamped with: an ITL gap or a streamed token belongs to the window
in which its chunk arrived, so a long request that outlives its level does not
carry the old concurrency's latency into the new one. Windows never overlap,
so one ``searchsorted`` over their sorted starts assigns millions of
timestamps at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.columns import numeric


@dataclass(frozen=True)
class LevelWindow:
    """One concurrency level's bounds (wall-clock seconds) and client health."""

    index: int
    concurrency: int
    start_wall: float
    end_wall: float
    window_start: float
    refine: bool = False
    client: Mapping[str, Any] = field(default_factory=dict)
    inferred: bool = False  # bounds came from the requests, not run.json
    #: How the load stage ran the level: its looks and why it ended (run.json ``decision``).
    decision: Mapping[str, Any] = field(default_factory=dict)
    #: Open loop: the offered rate (requests/s); None for a concurrency level.
    rate_rps: float | None = None

    @property
    def duration_s(self) -> float:
        """Length of the measured window (0 when warmup covers the whole level)."""
        return max(0.0, self.end_wall - self.window_start)

    @property
    def client_saturated(self) -> bool:
        return bool(self.client.get("saturated")) if self.client else False


def level_windows(run: Mapping[str, Any], requests: pd.DataFrame) -> tuple[list[LevelWindow], list[str]]:
    """Build the windows of every level, in run order, plus warnings about repairs.

    run.json is authoritative. A run that was killed may lack a level's
    ``end_wall`` (it ends where the next level starts, or at the run's end, or
    at the last request's end) or a whole level that requests refer to (its
    bounds are inferred from those requests), so a crashed run still analyzes.
    """
    warnings: list[str] = []
    warmup = float(run.get("warmup_s") or 0.0)
    starts = numeric(requests, "start_wall")
    ends = starts + np.nan_to_num(numeric(requests, "e2e_ms")) / 1000.0
    level_index = numeric(requests, "level_index")
    levels = numeric(requests, "level")

    raw: list[dict[str, Any]] = []
    for level in run.get("levels") or []:
        if level.get("start_wall") is None or level.get("index") is None:
            continue
        raw.append(dict(level))
    known = {int(level["index"]) for level in raw}

    # A negative index: the request started when no level was in force (after the last one ended,
    # e.g. a worker's user between the stop and its own end). It belongs to no level, by design.
    for idx in sorted({i for i in level_index[~np.isnan(level_index)].astype(int).tolist() if i >= 0} - known):
        mask = level_index == idx
        if np.isnan(starts[mask]).all():
            continue
        concurrency = levels[mask]
        concurrency = concurrency[~np.isnan(concurrency)]
        raw.append(
            {
                "index": idx,
                "concurrency": int(np.median(concurrency)) if len(concurrency) else 0,
                "start_wall": float(np.nanmin(starts[mask])),
                "end_wall": None,
                "refine": False,
                "client": {},
                "_inferred": True,
            }
        )
        warnings.append(
            f"level index {idx} is missing from run.json; its bounds were inferred from its requests"
        )

    raw.sort(key=lambda lv: float(lv["start_wall"]))
    run_end = run.get("ended_wall")
    windows: list[LevelWindow] = []
    for i, level in enumerate(raw):
        start = float(level["start_wall"])
        end = level.get("end_wall")
        inferred = bool(level.get("_inferred"))
        if end is None:
            inferred = True
            if i + 1 < len(raw):
                end = float(raw[i + 1]["start_wall"])
            elif run_end is not None:
                end = float(run_end)
            else:
                mine = ends[(level_index == int(level["index"])) & ~np.isnan(ends)]
                end = float(mine.max()) if len(mine) else start
            if not level.get("_inferred"):
                warnings.append(
                    f"level {level.get('concurrency')} has no end time in run.json (run interrupted?); "
                    "its end was inferred"
                )
        end = float(end)
        if i + 1 < len(raw) and end > float(raw[i + 1]["start_wall"]):
            end = float(raw[i + 1]["start_wall"])  # levels are sequential; never overlap
        window_start = min(start + warmup, end)
        windows.append(
            LevelWindow(
                index=int(level["index"]),
                concurrency=int(level.get("concurrency") or 0),
                start_wall=start,
                end_wall=end,
                window_start=window_start,
                refine=bool(level.get("refine", False)),
                client=dict(level.get("client") or {}),
                inferred=inferred,
                decision={
                    **dict(level.get("decision") or {}),
                    "looks_taken": list(level.get("looks") or []),
                    # how long its load was held for its measured requests (load/hold.py), when it was
                    **({"hold": dict(level["hold"])} if level.get("hold") else {}),
                },
                rate_rps=float(level["rate_rps"]) if level.get("rate_rps") is not None else None,
            )
        )
        if end - start > 0 and window_start >= end:
            warnings.append(
                f"level {windows[-1].concurrency}: warmup ({warmup:g} s) covers the whole level "
                f"({end - start:.1f} s); nothing was measured"
            )
    return windows, warnings


def locate(times: np.ndarray, windows: Sequence[LevelWindow]) -> np.ndarray:
    """Position (in ``windows``) of the measured window holding each time, or -1 (int32).

    Windows are disjoint, so their sorted bounds interleave as
    ``start₀ ≤ end₀ ≤ start₁ ≤ end₁ …``; one ``searchsorted`` over that list
    plus a lookup in a tiny table (odd slot → inside a window) assigns every
    timestamp in two passes over the data, whatever the number of levels.
    NaN times sort past the last bound and stay unassigned.
    """
    times = np.asarray(times, dtype=float)
    if not windows:
        return np.full(times.shape, -1, dtype=np.int32)
    order = sorted(range(len(windows)), key=lambda p: windows[p].window_start)
    bounds = np.empty(2 * len(order), dtype=float)
    lookup = np.full(2 * len(order) + 1, -1, dtype=np.int32)
    for slot, p in enumerate(order):
        bounds[2 * slot] = windows[p].window_start
        bounds[2 * slot + 1] = max(windows[p].end_wall, windows[p].window_start)
        if windows[p].end_wall > windows[p].window_start:
            lookup[2 * slot + 1] = p  # between start (inclusive) and end (exclusive)
    return lookup[np.searchsorted(bounds, times, side="right")]


def position_by_index(windows: Sequence[LevelWindow]) -> dict[int, int]:
    """Map a level's ``index`` (as stamped on requests) to its position in ``windows``."""
    return {w.index: pos for pos, w in enumerate(windows)}


def served_from(start: np.ndarray, ttft_ms: np.ndarray, rate_mode: bool, ttfb_ms: np.ndarray | None = None) -> np.ndarray:
    """Where each request's served life begins, for :func:`window_shares`: its start in closed loop,
    its first token at a rate (open loop, trace replay); without one (an embedding, an answer with no
    content) its first byte, and only without either its start.

    Why not the start at a rate: there the arrivals do not wait for the answers, so past the
    server's capacity its queue grows for the whole level, and a request's life from its (scheduled)
    start is mostly that wait. The shares then add up to something between the served and the
    offered rate: 12.5 req/s from a server that completes 10 (4 slots of 400 ms requests, 16 req/s
    offered), beside 160 tokens/s that are 10 requests' worth. From the first token the shares add
    up to 10.0. In closed loop the users hold the requests in flight constant, so no queue grows
    within a level, and the start stays (its figures unchanged).
    """
    start = np.asarray(start, dtype=float)
    if not rate_mode:
        return start
    first = start + np.asarray(ttft_ms, dtype=float) / 1000.0
    if ttfb_ms is not None:
        first = np.where(np.isfinite(first), first, start + np.asarray(ttfb_ms, dtype=float) / 1000.0)
    return np.where(np.isfinite(first), first, start)


def window_shares(begin: np.ndarray, end: np.ndarray, window_start: float, window_end: float) -> np.ndarray:
    """Each span ``[begin, end)``'s share (0 to 1) that fell in the measured window ``[window_start, window_end)``.

    Why the rates count shares rather than the requests that *ended* in the window: closed-loop
    users start a level together, so their requests end in batches, one batch a request's length
    apart. A window of a few requests' length (a level decided early) then holds one batch more
    or less than its length is worth: 14 users of 1.6 s requests ended 28 requests in a 2.55 s
    window, 11.0 a second, where the server served 8.7. A request counted by the share of its
    life inside the window adds up to the served rate whatever the phase (each request is one
    request spread over its life). A span of no length counts whole where it ended in the
    window; one without an end (NaN) counts nothing.
    """
    begin = np.asarray(begin, dtype=float)
    end = np.asarray(end, dtype=float)
    inside = np.clip(np.minimum(end, window_end) - np.maximum(begin, window_start), 0.0, None)
    length = end - begin
    at_end = (end >= window_start) & (end < window_end)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(length > 0, inside / length, at_end.astype(float))
    return np.nan_to_num(share, nan=0.0, posinf=0.0, neginf=0.0)
