"""Whether a rate level's server kept up: the client's count, and the server's own waiting count beside it.

The client flags a level whose completions fell below :data:`~loadtest.analysis.open_loop.KEEP_UP`
of the sends they answer (``completions_behind``, :mod:`served_span`). That count is indirect: a
burst at the window's edge, or requests whose lives the span cuts, can leave it short though no
request ever waited. A trial's trace replay flagged its capacity level "the server could not keep
up" (25 arrivals, 21 completions in a 3 s window) while llama.cpp's own gauge read 0 requests
deferred in every scrape and 2 of 4 slots busy at most, with a TTFT p95 of 93 ms against 500.

A backlog at a server is requests that wait for a place in its batch, so where the server's waiting
gauge was scraped at least :data:`MIN_WAITING_SCRAPES` times in the window and read 0 every time, the
report says so beside the "!" (``server_waiting_max`` 0, a legend line): no request queued there, so
the shortfall is a burst the window's edge cut, or requests running longer in a fuller batch. It
does not take the "!" away: an engine that admits every arrival, as vLLM does below
``max_num_seqs``, shows an overload as more requests running, each slower, and its waiting gauge
stays 0 until the batch or the KV cache is full; a gauge of 0 cannot tell that apart from a burst,
and a flag that hides a real overload is worse than one the legend explains.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.open_loop import KEEP_UP
from loadtest.analysis.results import LevelResult
from loadtest.analysis.server import signal_series, signals_present, window_stats

#: Fewer scrapes of the waiting gauge in a window than this: a reading of 0 cannot say that no request queued.
MIN_WAITING_SCRAPES = 3


def _waiting_series(samples: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The first waiting-role signal's value per scrape (summed over its series and replicas), or None."""
    if samples is None or not len(samples):
        return None
    waiting = next((s for s in signals_present(samples) if s.role == "waiting"), None)
    return signal_series(samples, waiting) if waiting is not None else None


def confirm_keep_up(levels: Sequence[LevelResult], samples: pd.DataFrame | None) -> None:
    """Set each rate level's ``server_waiting_max``, and note where a waiting gauge read 0 in enough scrapes."""
    series = _waiting_series(samples)
    for level in levels:
        loop = level.open_loop
        if not loop:
            continue
        stats = window_stats(*series, level.window_start, level.end_wall) if series is not None else None
        loop["server_waiting_max"] = float(stats.max) if stats is not None and stats.n else None
        # internal (not a summary.json key): enough scrapes that "0 every time" means no queue was seen
        loop["no_queue_seen"] = stats is not None and stats.n >= MIN_WAITING_SCRAPES and stats.max <= 0


def behind_without_queue(loop: dict[str, Any] | None) -> bool:
    """The client's count fell behind ("!"), and the server's waiting gauge read 0 in every scrape of the window."""
    return bool(loop and loop.get("completions_behind") and not loop.get("server_kept_up") and loop.get("no_queue_seen"))


def _name(level: LevelResult) -> str:
    return f"{level.speedup:g}×" if level.speedup is not None else f"{level.load_text} req/s"


def behind_legend(levels: Sequence[LevelResult]) -> str:
    """The "!" mark's legend: what the completions are held against, with the figures where the table's differ."""
    text = (f"! = the server could not keep up: completions fell below {KEEP_UP:.0%} of the sends they answer "
            "(those sent once the requests in flight had filled up)")
    differ = [f"at {_name(lv)} {lv.open_loop['keep_up_sent_rps']:.1f}/s, not the {lv.open_loop['sent_rps']:.1f} shown"
              for lv in levels if lv.open_loop and not lv.open_loop["server_kept_up"]
              and lv.open_loop.get("keep_up_sent_rps") is not None
              and round(lv.open_loop["keep_up_sent_rps"], 1) != round(lv.open_loop["sent_rps"], 1)]
    return text + (f": {'; '.join(differ)}" if differ else "")


def no_queue_legend(levels: Sequence[LevelResult]) -> str | None:
    """Levels marked "!" whose server's waiting count stayed 0: what else their shortfall can be."""
    named = [lv for lv in levels if behind_without_queue(lv.open_loop)]
    if not named:
        return None
    which = ", ".join(_name(lv) for lv in named)
    return (f"at {which} the server's waiting count read 0 in every scrape of the window although the completions "
            f"fell below {KEEP_UP:.0%} of the sends: no request queued for a place in its batch, so the \"!\" there is "
            "a burst the window's edge cut, or requests running longer in a fuller batch (an engine that admits every "
            "arrival, as vLLM does below max_num_seqs, shows an overload that way: ITL and TPOT judge it)")
