"""The run record: the one definition of ``run.json``.

``run.json`` is what a run folder says about the run beside its records: the
resolved scenario (secrets removed), the environment, the level spans, what
preflight found, and how the run ended. ``loadtest run`` writes it at every
level change; ``analyze``, ``compare``, ``history``, ``report`` and the
storage commands read it back.

Every key is a field here. Writing goes through :class:`RunRecord`, which
refuses an unknown key (``extra="forbid"``) and a wrong type on assignment
(``validate_assignment``), so a key cannot be written twice under two names or
misspelt. Reading goes through :meth:`RunRecord.from_json`, which accepts
older folders: a ``format`` below :data:`RUN_FORMAT` (or none) is read with
the defaults below for what it lacks, and keys this version does not know are
set aside rather than refused (an older tool may have written them).
:func:`loadtest.paths.read_run_json` still refuses a *newer* format with one
line, before this model sees it.

Consumers that work on plain data (the analysis is pure and receives the
record as a mapping: ``analyze(frame, run)``) get :meth:`RunRecord.to_json`'s
dict; ``tests/test_run_record.py`` checks that every run.json key read
anywhere in ``loadtest/`` is a field here.

This module imports nothing of the pipeline (only pydantic), so every layer
may use it.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

#: The run.json format this version writes and reads (and every lower one).
RUN_FORMAT = 1

#: ``load_mode``: which load mode produced the levels (see :mod:`loadtest.load.modes`).
#: A level's x axis follows from it: concurrency (users) or offered rate (requests/s).
LoadModeName = Literal["closed_loop", "open_loop", "trace_replay"]
#: How a message names a run of each mode (the regression gate refuses to compare runs of two modes:
#: see compare/engine.py ``require_same_mode``).
LOAD_MODE_WORDS: dict[str, str] = {"closed_loop": "a closed-loop run (load.levels)",
                                   "open_loop": "an open-loop run (load.rates)",
                                   "trace_replay": "a trace replay (load.speedups)"}

_log = logging.getLogger(__name__)


class _Strict(BaseModel):
    """Written by this version: every key declared, every assignment checked."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ServerMetrics(_Strict):
    """``server_metrics``: the scraper's settings, and its health once the run ends."""

    enabled: bool = False
    #: The metrics URL with any credentials removed (redact.public_url).
    url: str | None = None
    #: target.metrics.urls (one per replica), credentials removed; empty for a single URL.
    urls: list[str] = Field(default_factory=list)
    #: target.metrics.prometheus ({url, selector, replica_label}), the URL's credentials removed.
    prometheus: dict[str, Any] | None = None
    interval_s: float | None = None
    signals: list[str] = Field(default_factory=list)
    #: Samples per level and overall (analysis/server.py scrape_health), written at the end.
    health: dict[str, Any] | None = None
    levels: list[dict[str, Any]] | None = None
    #: Why the health could not be computed (a broken metrics file never costs the run).
    health_error: str | None = None


class Preflight(_Strict):
    """``preflight``: what the one request before the load found (loadtest/preflight.py)."""

    ttft_ms: float
    token_source: str
    continuous_usage: bool
    attempts: list[dict[str, Any]]
    dropped_fields: list[str]
    max_tokens_field: str
    adaptations: list[Any]


class AfterLoad(_Strict):
    """``after_load``: the one request sent once the load had ended, because the run ended on a streak of
    requests the target answered nothing to (loadtest/after_load.py): is the target still gone?"""

    at_wall: float
    #: the target sent a response head (any status, an error page too): it is there
    answered: bool
    ok: bool
    error_kind: str | None = None
    status: int | None = None


class WarmupRequests(_Strict):
    """``warmup_requests``: the unmeasured requests sent before the first level."""

    sent: int
    failed: int


class RunRecord(_Strict):
    """``run.json``, key by key (the order is the order written)."""

    server_metrics: ServerMetrics = Field(default_factory=ServerMetrics)
    #: ``--headroom``/``--scale-up-s``/``--traffic-growth`` (analysis/autoscaling.py reads them).
    autoscaling: dict[str, Any] = Field(default_factory=dict)
    #: ``--usd-per-hour``/``--peak-users``/``--peak-rps`` (analysis/run_cost.py).
    cost_options: dict[str, Any] = Field(default_factory=dict)
    #: A warm-up run (``--warmup-run``): compare --history and history leave it out.
    warmup_run: bool = False
    #: None: written before the format was stamped.
    format: int | None = RUN_FORMAT
    name: str = ""
    tool_version: str | None = None
    python: str | None = None
    locust: str | None = None
    #: hostname, cpus, platform of the machine that ran the load.
    host: dict[str, Any] = Field(default_factory=dict)
    #: base_url (credentials removed), model, api.
    target: dict[str, Any] = Field(default_factory=dict)
    #: The resolved scenario, secrets removed (Scenario.public_dict()).
    scenario: dict[str, Any] = Field(default_factory=dict)
    #: What ``loadtest compare`` requires to be equal, with its ``hash`` and the dataset
    #: hashes taken when the run was made (loadtest/fingerprint.py). Absent in older runs.
    compare_fingerprint: dict[str, Any] | None = None
    warmup_s: float = 0.0
    #: Each level is looked at on this schedule, each look at this confidence (analysis/decide.py).
    looks_s: list[float] = Field(default_factory=list)
    verdict_confidence: float | None = None
    #: Mixed into every prompt's nonce: no two runs share a prompt prefix (workload.cache_bust).
    prompt_salt: str = ""
    load_mode: LoadModeName = "closed_loop"
    started_wall: float | None = None
    #: None while the run goes on (or when it died without closing the folder).
    ended_wall: float | None = None
    #: None: an older run that did not say.
    complete: bool | None = None
    #: local, workers (local worker processes) or master (workers started elsewhere).
    mode: str = "local"
    workers: list[str] = Field(default_factory=lambda: ["local"])
    workers_lost: list[dict[str, Any]] = Field(default_factory=list)
    #: Datasets read (path, format, sha256, rows).
    datasets: list[dict[str, Any]] = Field(default_factory=list)
    #: Trace replay: the window replayed (workload/trace.py Trace.fingerprint: path, format, sha256,
    #: rows, period_s, mean_rate_rps: the rate at speedup 1). None otherwise.
    trace: dict[str, Any] | None = None
    #: The workload's own record of datasets and classes (workload.workload_fingerprint; no hash).
    workload_fingerprint: dict[str, Any] | None = None
    preflight: Preflight | None = None
    warmup_requests: WarmupRequests | None = None
    #: Requests resent on a fresh connection after a stale keep-alive one (not failures).
    keepalive_resends: int | None = None
    #: Why the run stopped early, when it did not end by itself: "disk_full", "preflight" (no load
    #: sent), "signal" (Ctrl-C or SIGTERM: the name is in ``stop_signal``) or "web_ui" (its Stop button).
    #: None for a complete run, and for one that was killed or crashed (then ``ended_wall`` is None too).
    stopped_by: str | None = None
    stop_error: str | None = None
    #: With ``stopped_by: "signal"``: which one ("SIGINT", "SIGTERM"); None otherwise.
    stop_signal: str | None = None
    #: The model's own metadata (n_params, size, n_ctx_train) for the roofline (analysis/stack.py).
    #: Read there; this version's ``run`` does not write it (profile keeps it in its own output).
    model_meta: dict[str, Any] | None = None
    #: ``--refine``: how refinement ended, {ended, why, probes, waits} (analysis/refine_end.py, load/settle.py).
    refine: dict[str, Any] | None = None
    #: The request sent after the load when the run ended on requests the target answered nothing to
    #: (analysis/target_lost.py reads it); None when the run did not end so, or was written before.
    after_load: AfterLoad | None = None
    #: The level spans (load/levels.py LevelSpan.to_json), in the order they ran.
    levels: list[dict[str, Any]] = Field(default_factory=list)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """A run.json as written by this or an older version (keys it lacks take the defaults).

        Keys this version does not define are set aside (logged), not refused:
        an older or newer-minor writer may have had them. A newer *format* is
        refused before this by :func:`loadtest.paths.read_run_json`.
        """
        known = {k: v for k, v in data.items() if k in cls.model_fields}
        unknown = sorted(set(data) - set(known))
        if unknown:
            _log.info("run.json: keys this version does not define were ignored: %s", ", ".join(unknown))
        record = cls.model_construct()  # the defaults
        for key, value in known.items():
            try:
                setattr(record, key, value)
            except ValueError:  # an older type of the same key: keep it as written rather than refuse the folder
                _log.info("run.json: %s kept as written (not this version's type)", key)
                object.__setattr__(record, key, value)
        if "format" not in data:
            object.__setattr__(record, "format", None)
        return record

    def to_json(self) -> dict[str, Any]:
        """The plain dict written to run.json (and handed to the pure analysis)."""
        return self.model_dump(mode="json", warnings=False)


def normalized(run: Mapping[str, Any]) -> dict[str, Any]:
    """A run.json mapping read through the model: every defined key present, with its default if absent."""
    return RunRecord.from_json(run).to_json()
