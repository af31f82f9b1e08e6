"""Request bodies for a scenario's workload.

One module per idea:

``words``      synthetic prompts of common one-token words, and the word-count estimate
``dataset``    JSONL and ShareGPT files, read as a stream, handed out in order or shuffled
``prefix``     shared system prompts (``groups`` distinct prefixes of ``tokens`` words)
``generator``  one user's stream: class choice, conversations, the body and its record tags
``trace``      a production trace's window (``workload.trace``), replayed at ``load.speedups``

:func:`prepare` loads every dataset a scenario names, and its trace, once per
process and before any load or run folder, so a bad file is one line at
start-up, not a failure inside a Locust user nor an empty run folder.
"""

from __future__ import annotations

from typing import Any

from loadtest.errors import InputError
from loadtest.scenario import MAX_RATE_RPS, Scenario, number_text
from loadtest.workload.dataset import load_dataset
from loadtest.workload.generator import PlannedRequest, Workload
from loadtest.workload.trace import load_trace

__all__ = ["PlannedRequest", "Workload", "prepare", "workload_fingerprint"]


def _dataset_specs(scenario: Scenario) -> list[tuple[str, Any]]:
    """Each distinct dataset with the YAML path that names it (for its error lines)."""
    w = scenario.workload
    specs = [("workload.dataset.path", w.dataset)]
    specs += [(f"workload.classes[{i}].dataset.path", c.dataset) for i, c in enumerate(w.classes)]
    seen, out = set(), []
    for field, spec in specs:
        if spec is not None and (spec.path, spec.format) not in seen:
            seen.add((spec.path, spec.format))
            out.append((field, spec))
    return out


def prepare(scenario: Scenario) -> list[dict[str, Any]]:
    """Load the scenario's datasets and trace (raising a one-line InputError that names the YAML path); return the datasets' fingerprints."""
    out = []
    for field, spec in _dataset_specs(scenario):
        try:
            out.append(load_dataset(spec).fingerprint())
        except InputError as err:
            raise InputError(f"{field} {err}") from None
    _prepare_trace(scenario)
    return out


def _prepare_trace(scenario: Scenario) -> None:
    """Read the trace window now, and hold each speedup's rate to the open-loop bound.

    The trace was read first by run.json's fingerprint, after the run folder was
    made, so a bad file left an empty folder behind. A speedup's rate (the
    window's mean rate × the speedup) is only known once the window is read,
    so it is checked here, against the same :data:`~loadtest.scenario.MAX_RATE_RPS`
    that ``load.rates`` is held to: ``speedups: [1, 50000]`` asked for 207,500
    requests/s and passed ``validate``.
    """
    if scenario.workload.trace is None:
        return
    trace = load_trace(scenario.workload.trace)  # its error lines start "workload.trace: "
    mean = trace.mean_rate_rps
    for i, speedup in enumerate(scenario.load.speedups or []):
        rate = speedup * mean
        if rate > MAX_RATE_RPS:
            raise InputError(
                f"load.speedups[{i}]: {number_text(speedup)}× the trace window ({mean:.4g} req/s at 1×) is {rate:.6g} "
                f"requests/s; a level is at most {MAX_RATE_RPS:.0f} requests/s: more than any fleet of workers sends, "
                "so a typo (see 'Limits' in docs/scenarios.md)"
            )


def workload_fingerprint(scenario: Scenario) -> dict[str, Any]:
    """What makes two runs' workloads comparable: dataset content hashes and the classes.

    Recorded in run.json (``workload_fingerprint``) for the regression gate:
    the same scenario name on different data, or with a different class mix,
    is a different experiment.
    """
    w = scenario.workload
    return {
        "datasets": [
            {"sha256": fp["sha256"], "format": fp["format"], "rows": fp["rows"]} for fp in prepare(scenario)
        ],
        "classes": [
            # the model key only where a class names one, so older scenarios keep their fingerprint
            {"name": c.name, "weight": c.weight, "overrides": sorted(c.overrides()), **({"model": c.model} if c.model else {})}
            for c in w.classes
        ],
        "shared_prefix": w.shared_prefix.model_dump() if w.shared_prefix else None,
        "conversation": w.conversation.model_dump() if w.conversation else None,
    }
