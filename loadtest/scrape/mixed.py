"""Is one metrics URL answered by several processes? (a load balancer or a Service in front)

Behind a balancer each scrape of one URL reaches whichever replica the balancer picks,
so its series jump between replicas. Two signs tell, both from the samples alone:

* ``process_start_time_seconds`` (exported by every prometheus_client process: vLLM,
  SGLang, TGI's router, the mock) takes another value and then changes again -- one change
  is a restart, two or more are several processes;
* a counter goes backwards at two or more scrapes -- one drop is a restart, more are
  several processes at different counts.

Pure: a function of the samples of one source (one replica id).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

PROCESS_START = "process_start_time_seconds"
#: One change is a restart; this many are several processes.
CHANGES = 2


def _changes(values: np.ndarray) -> int:
    return int(np.count_nonzero(values[1:] != values[:-1])) if len(values) > 1 else 0


def mixing_evidence(samples: pd.DataFrame) -> str | None:
    """Why these samples (one source's) come from several processes, or None when they need not."""
    if not len(samples):
        return None
    start = samples[samples["metric"] == PROCESS_START].sort_values("wall")
    if len(start):
        distinct = start.groupby("wall")["value"].max().to_numpy(dtype=float)
        changes = _changes(distinct)
        if changes >= CHANGES:
            return f"{PROCESS_START} changed {changes} times ({len(set(distinct.tolist()))} processes)"
    counters = samples[
        (samples["type"] == "counter") & samples["metric"].str.endswith("_total")
    ].sort_values("wall")
    worst = (0, "")
    for (metric, labels), rows in counters.groupby(["metric", "labels"], sort=False):
        values = rows["value"].to_numpy(dtype=float)
        drops = int(np.count_nonzero(np.diff(values) < 0))
        if drops > worst[0]:
            worst = (drops, metric + (labels if labels != "{}" else ""))
    if worst[0] >= CHANGES:
        return f"the counter {worst[1]} went backwards {worst[0]} times"
    return None


def process_counts(samples: pd.DataFrame) -> dict[str, int]:
    """Replica id -> how many processes answered it, where ``process_start_time_seconds`` shows several.

    Behind a balancer that reaches every replica (round robin, or random over a few dozen scrapes)
    that is the replicas' count; with only a counter going backwards as evidence there is none.
    """
    if not len(samples):
        return {}
    out = {}
    replica = samples["replica"] if "replica" in samples else pd.Series([""] * len(samples), index=samples.index)
    for rid, rows in samples[samples["metric"] == PROCESS_START].groupby(replica.fillna(""), sort=True):
        distinct = rows.sort_values("wall").groupby("wall")["value"].max().to_numpy(dtype=float)
        if _changes(distinct) >= CHANGES:
            out[str(rid)] = len(set(distinct.tolist()))
    return out


def mixed_sources(samples: pd.DataFrame) -> dict[str, str]:
    """Replica id ('' for the single default URL) -> the evidence that several processes answer it."""
    if not len(samples):
        return {}
    out = {}
    replica = samples["replica"] if "replica" in samples else pd.Series([""] * len(samples), index=samples.index)
    for rid, rows in samples.groupby(replica.fillna(""), sort=True):
        evidence = mixing_evidence(rows)
        if evidence:
            out[str(rid)] = evidence
    return out


def mixed_warning(where: str, evidence: str) -> str:
    """The warning, with what to configure instead."""
    return (
        f"server metrics: the scrapes of {where} come from several processes ({evidence}): it is a load balancer "
        "or a Service in front of replicas, so the server view mixes them (running/waiting jump between replicas, "
        "thresholds are wrong); name each replica's metrics endpoint in target.metrics.urls, or read them from "
        "Prometheus with target.metrics.prometheus: {url, selector}."
    )
