"""Whether a rate level's server kept up: the client's count, checked against the server's own waiting count.

The client flags a level whose completions fell below :data:`~loadtest.analysis.open_loop.KEEP_UP`
of the sends they answer (``completions_behind``, :mod:`served_span`). That count is indirect: a
burst at the window's edge, or requests whose lives the span cuts, can leave it short though no
request ever waited. A trial's trace replay flagged its capacity level "the server could not keep
up" (25 arrivals, 21 completions in a 3 s window) while llama.cpp's own gauge read 0 requests
deferred in every scrape and 2 of 4 slots busy at most, with a TTFT p95 of 93 ms against 500.

A backlog at a server is requests that wait for a place in its batch. So where the server's waiting
gauge was scraped at least :data:`MIN_WAITING_SCRAPES` times in the window and read 0 every time,
no backlog built up there, whatever the count says: ``server_kept_up`` is true (the level is not
marked "!" and the sustained check, which needs a growing queue, does not fail it),
``completions_behind`` keeps the client's finding and ``server_waiting_max`` the gauge's reading,
and the legend says what else a shortfall without a queue can be: a burst the window's edge cut,
or requests running longer in a fuller batch (an engine that admits every arrival, as vLLM does
below ``max_num_seqs``, shows that as a slower ITL and TPOT, which their own SLOs judge). Without
the gauge (not scraped, no waiting signal, too few scrapes) the client's count stands.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from loadtest.analysis.open_loop import KEEP_UP
from loadtest.analysis.results import LevelResult
from loadtest.analysis.server import signal_series, signals_present, window_stats

#: Fewer scrapes of the waiting gauge in a window than this: it cannot overrule the client's count.
MIN_WAITING_SCRAPES = 3


def _waiting_series(samples: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The first waiting-role signal's value per scrape (summed over its series and replicas), or None."""
    if samples is None or not len(samples):
        return None
    waiting = next((s for s in signals_present(samples) if s.role == "waiting"), None)
    return signal_series(samples, waiting) if waiting is not None else None


def confirm_keep_up(levels: Sequence[LevelResult], samples: pd.DataFrame | None) -> None:
    """Set each rate level's ``server_waiting_max`` and let a waiting gauge that stayed 0 overrule the count."""
    series = _waiting_series(samples)
    for level in levels:
        loop = level.open_loop
        if not loop:
            continue
        stats = window_stats(*series, level.window_start, level.end_wall) if series is not None else None
        loop["server_waiting_max"] = float(stats.max) if stats is not None and stats.n else None
        if loop["server_kept_up"] or stats is None or stats.n < MIN_WAITING_SCRAPES or stats.max > 0:
            continue
        loop["server_kept_up"] = True


def overruled(loop: dict[str, Any] | None) -> bool:
    """The client's count fell behind, but the server's waiting gauge said no request waited."""
    return bool(loop and loop.get("completions_behind") and loop.get("server_kept_up"))


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


def overruled_legend(levels: Sequence[LevelResult]) -> str | None:
    """Levels whose completions fell behind without a "!": the server's waiting count stayed 0."""
    named = [lv for lv in levels if overruled(lv.open_loop)]
    if not named:
        return None
    which = ", ".join(_name(lv) for lv in named)
    return (f"at {which} the completions fell below {KEEP_UP:.0%} of the sends without a \"!\": the server's waiting "
            "count read 0 in every scrape of the window, so no request queued there; the shortfall is a burst the "
            "window's edge cut, or requests running longer in a fuller batch (ITL and TPOT show that)")
