"""Records → per-level metrics → SLO verdicts → capacity. Pure pandas/numpy, no Locust.

The pipeline inside, one module per idea:

``windows``   which time span of each level is measured (warmup excluded)
``columns``   record columns as plain arrays, whatever pandas made of them
``chunks``    flattened chunk timestamps → per-token ITL and streamed tokens
``chunk_lists`` / ``chunk_pass``   the chunk lists read batch by batch, in one pass (never all at once)
``hold_cut``  a measured request that outlived its level's hold is cut at the hold's end
``frame``     per-request flags (measured, complete, spillover) and samples
``quantiles`` / ``bootstrap``   percentiles that tolerate failures, and their CIs
``metrics``   per-level distributions, throughput, goodput, errors
``verdict``   each SLO check → pass / fail / uncertain
``capacity``  the highest concurrency that holds, and why the next one fails
``classes``   request classes: per-class levels, per-class SLOs, the worst verdict wins
``refine``    the next concurrency (or rate) to probe by bisection
``open_loop`` offered / sent / completed rates, send lag and in-flight of rate levels
``caveats``   warnings a reader needs to weigh the numbers
``failures``  the failed requests grouped by their message, numbers aside
``signals`` / ``server``   the server's scraped metrics joined to the levels on wall time
``autoscaling``   scale-out thresholds from the capacity and the server's signals
``results``   the output dataclasses (``Analysis``, ``LevelResult``, ``Stats``, ``Check``, ``Capacity``)
``pipeline``  :func:`analyze` and :func:`analyze_run`: the modules above, wired in order

Public entry points: :func:`analyze` (data already in memory, e.g. for tests
and the live runner) and :func:`analyze_run` (a run folder on disk).

The names below are loaded on first use (PEP 562), for start-up time: the
scenario imports ``loadtest.analysis.slo`` in every command, and importing
a submodule runs this file first; the pipeline's stack (pandas, pyarrow)
costs about half a second that ``loadtest run`` would otherwise spend before
its server-metrics scraper starts, and ``loadtest mock`` or ``validate``
never needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loadtest.analysis.pipeline import analyze, analyze_run
    from loadtest.analysis.refine import next_refine_level, next_refine_rate
    from loadtest.analysis.results import Analysis, Capacity, Check, LevelResult, Stats
    from loadtest.analysis.slo import SloCheck, SloSpec

#: Each public name and the module that defines it.
_HOMES = {
    "Analysis": "results",
    "Capacity": "results",
    "Check": "results",
    "LevelResult": "results",
    "Stats": "results",
    "SloCheck": "slo",
    "SloSpec": "slo",
    "analyze": "pipeline",
    "analyze_run": "pipeline",
    "next_refine_level": "refine",
    "next_refine_rate": "refine",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'loadtest.analysis' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"loadtest.analysis.{home}"), name)
    globals()[name] = value  # once
    return value
